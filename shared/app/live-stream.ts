import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { SubscriptionStore } from './ports/connections.js';
import type { RunStore } from './ports/runs.js';
import type { Principal } from '../domain/entities.js';
import type { Clock } from './ports.js';

/** Posts to a WebSocket connection; 'gone' when the connection has closed. */
export interface ConnectionPoster {
  post(connectionId: string, data: string): Promise<'ok' | 'gone'>;
  /** Forgets a closed connection and its subscriptions. */
  forget(connectionId: string): Promise<void>;
}

export interface LiveStreamDeps {
  readonly runs: RunStore;
  readonly subscriptions: SubscriptionStore;
  readonly poster: ConnectionPoster;
  readonly clock: Clock;
}

export const clientMessageSchema = z.discriminatedUnion('action', [
  z.strictObject({
    action: z.literal('subscribe'),
    runId: z.string().min(1).max(100),
    lastEventId: z.number().int().min(0).optional(),
  }),
]);

const PAGE = 100;

/**
 * The live stream: a subscription replays the run's events after `lastEventId`, then the
 * broadcaster sends new ones as the event log's stream delivers them. Both go through `deliver`,
 * which sends under the subscription's lock from the last seq sent, so the seam between replay
 * and live has no gap and no duplicate.
 */
export function makeLiveStream(deps: LiveStreamDeps) {
  const { subscriptions, runs, poster } = deps;

  /** Sends the connection every event of the run it has not been sent, in order. */
  async function deliver(connectionId: string, runId: string): Promise<void> {
    const owner = randomUUID();
    if ((await subscriptions.lock(connectionId, runId, owner, deps.clock.now())) !== 'held') return;
    for (;;) {
      let delivered = (await subscriptions.delivered(connectionId, runId)) ?? 0;
      for (;;) {
        const events = await runs.events(runId, delivered, PAGE);
        for (const event of events) {
          if ((await poster.post(connectionId, JSON.stringify(event))) === 'gone') {
            await poster.forget(connectionId);
            return;
          }
          delivered = event.seq;
          // A connection that closed mid-delivery took its subscription (and our lock) with it: nothing
          // is left to send. Failing here instead would make the stream retry the whole batch, with
          // backoff, and hold up every other run's live events behind it.
          if ((await subscriptions.markDelivered(connectionId, runId, owner, delivered)) === 'lost') return;
        }
        if (events.length < PAGE) break;
      }
      if ((await subscriptions.unlock(connectionId, runId, owner)) === 'released') return;
    }
  }

  return {
    deliver,

    /** A message from a client; anything but a valid subscribe to a visible run gets an error message. */
    async receive(connectionId: string, principal: Principal, body: string): Promise<void> {
      let message: z.infer<typeof clientMessageSchema>;
      try {
        message = clientMessageSchema.parse(JSON.parse(body));
      } catch {
        await poster.post(
          connectionId,
          JSON.stringify({
            type: 'error',
            message: 'expected {"action": "subscribe", "runId": "...", "lastEventId"?: n}',
          }),
        );
        return;
      }
      const record = await runs.load(message.runId);
      if (!record || record.run.tenantId !== principal.tenantId) {
        await poster.post(connectionId, JSON.stringify({ type: 'error', message: `run '${message.runId}' not found` }));
        return;
      }
      await subscriptions.subscribe(
        { connectionId, runId: message.runId, tenantId: principal.tenantId, delivered: message.lastEventId ?? 0 },
        deps.clock.now(),
      );
      await deliver(connectionId, message.runId);
    },

    /** New events from the log's stream: deliver each affected run to its subscribers. */
    async broadcast(appended: ReadonlyArray<{ runId: string; tenantId: string }>): Promise<void> {
      const runsByTenant = new Map<string, Set<string>>();
      for (const { tenantId, runId } of appended) {
        const runs = runsByTenant.get(tenantId) ?? new Set<string>();
        runsByTenant.set(tenantId, runs.add(runId));
      }
      for (const [tenantId, runIds] of runsByTenant) {
        const subscribed = await subscriptions.subscribers(tenantId, [...runIds]);
        await Promise.all(
          [...subscribed].flatMap(([runId, connections]) =>
            connections.map((connectionId) => deliver(connectionId, runId)),
          ),
        );
      }
    },
  };
}

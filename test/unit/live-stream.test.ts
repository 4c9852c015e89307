import { describe, expect, it } from 'vitest';
import { makeLiveStream } from '../../shared/app/live-stream.js';
import type { Subscription, SubscriptionStore } from '../../shared/app/ports/connections.js';
import { makeFakeClock } from '../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryStores } from '../../shared/app/ports/in-memory/runs.js';
import { chainEvents, EMPTY_CHAIN, type RunEvent } from '../../shared/domain/events.js';

const RUN = { runId: 'run-1', tenantId: 't1' };
const { events: LOG } = chainEvents(
  EMPTY_CHAIN,
  RUN,
  [1, 2, 3].map((n) => ({
    eventId: `e${n}`,
    type: 'step.output' as const,
    timestamp: '2026-01-01T00:00:00.000Z',
    stepId: 's',
    payload: { text: `line ${n}` },
    meta: {},
  })),
);

/** Subscriptions in memory with the DynamoDB store's lock rules; `remove` is a connection's $disconnect. */
function memorySubscriptions() {
  const subs = new Map<string, Subscription & { owner?: string; dirty: boolean }>();
  const id = (connectionId: string, runId: string) => `${connectionId}/${runId}`;
  const store: SubscriptionStore = {
    async subscribe(sub) {
      subs.set(id(sub.connectionId, sub.runId), { ...sub, dirty: false });
    },
    async subscribers(tenantId, runIds) {
      const found = new Map<string, string[]>();
      for (const s of subs.values())
        if (s.tenantId === tenantId && runIds.includes(s.runId))
          found.set(s.runId, [...(found.get(s.runId) ?? []), s.connectionId]);
      return found;
    },
    async lock(connectionId, runId, owner) {
      const sub = subs.get(id(connectionId, runId));
      if (!sub) return 'gone';
      if (sub.owner) return ((sub.dirty = true), 'busy');
      sub.owner = owner;
      return 'held';
    },
    async delivered(connectionId, runId) {
      return subs.get(id(connectionId, runId))?.delivered;
    },
    async markDelivered(connectionId, runId, owner, seq) {
      const sub = subs.get(id(connectionId, runId));
      if (sub?.owner !== owner) return 'lost';
      subs.set(id(connectionId, runId), { ...sub, delivered: seq });
      return 'marked';
    },
    async unlock(connectionId, runId, owner) {
      const sub = subs.get(id(connectionId, runId));
      if (sub?.owner !== owner) return 'released';
      if (sub.dirty) return ((sub.dirty = false), 'dirty');
      sub.owner = undefined;
      return 'released';
    },
  };
  return { store, remove: (connectionId: string) => subs.delete(id(connectionId, RUN.runId)) };
}

describe('the live stream', () => {
  it('stops delivering, without failing the broadcast, when the connection closes mid-delivery', async () => {
    const subscriptions = memorySubscriptions();
    const posted: Array<[string, number]> = [];
    const live = makeLiveStream({
      runs: { ...makeInMemoryStores().runs, events: async (_runId, since) => LOG.filter((e) => e.seq > since) },
      subscriptions: subscriptions.store,
      clock: makeFakeClock(),
      poster: {
        async post(connectionId, data) {
          posted.push([connectionId, (JSON.parse(data) as RunEvent).seq]);
          // The browser goes away after its first event: its $disconnect removes the subscription.
          if (connectionId === 'gone-soon') subscriptions.remove(connectionId);
          return 'ok';
        },
        async forget() {},
      },
    });
    await subscriptions.store.subscribe({ connectionId: 'gone-soon', ...RUN, delivered: 0 }, new Date());
    await subscriptions.store.subscribe({ connectionId: 'staying', ...RUN, delivered: 0 }, new Date());

    await expect(live.broadcast([RUN])).resolves.toBeUndefined();

    expect(posted.filter(([c]) => c === 'gone-soon')).toEqual([['gone-soon', 1]]);
    expect(posted.filter(([c]) => c === 'staying').map(([, seq]) => seq)).toEqual([1, 2, 3]);
  });
});

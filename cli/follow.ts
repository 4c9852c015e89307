import { z } from 'zod';
import { ApiError, NetworkError } from './errors.js';

/**
 * An event envelope as the CLI reads it: loose, so an event type or field added later still
 * streams. The envelope itself is `runEventSchema` in `shared/domain/events.ts`.
 */
export const streamEventSchema = z.looseObject({
  seq: z.number().int().positive(),
  type: z.string(),
  runId: z.string(),
  timestamp: z.string(),
  stepId: z.string().optional(),
  targetId: z.string().optional(),
  payload: z.record(z.string(), z.unknown()).default({}),
  meta: z.looseObject({ workerId: z.string().optional() }).default({}),
});
export type StreamEvent = z.infer<typeof streamEventSchema>;

/** Keeps a run's events in `seq` order, each once: what a reconnect replays twice is dropped. */
export class Sequencer {
  constructor(public last = 0) {}

  /** `next` (and moves on), `duplicate` (seen already) or `gap` (an event is missing before it). */
  accept(seq: number): 'next' | 'duplicate' | 'gap' {
    if (seq <= this.last) return 'duplicate';
    if (seq !== this.last + 1) return 'gap';
    this.last = seq;
    return 'next';
  }
}

/** The socket the follower needs: the WHATWG WebSocket Node.js has built in. */
export interface Socket {
  send(data: string): void;
  close(): void;
  addEventListener(type: 'open' | 'close' | 'error', listener: () => void): void;
  addEventListener(type: 'message', listener: (event: { data: unknown }) => void): void;
}

export interface FollowOptions {
  readonly runId: string;
  readonly token: string;
  /** Without it, the events endpoint is polled instead. */
  readonly wsUrl?: string;
  /** Events up to this seq were seen already. */
  readonly since?: number;
  /** A page of events after `since` from `GET /v1/runs/{id}/events`. */
  fetchEvents(since: number): Promise<StreamEvent[]>;
  onEvent(event: StreamEvent): void | Promise<void>;
  /** True for the event that ends the follow (the run ended). */
  isEnd(event: StreamEvent): boolean;
  /** A note for the user (a reconnect). */
  notice?(text: string): void;
  /** Test hook: drop the first connection after this many events, ignoring what it still sends. */
  readonly dropAfter?: number;
  /** With no event for this long the events endpoint is read, so a silent socket loses nothing. */
  readonly idleMs?: number;
  readonly openSocket?: (url: string) => Socket;
}

const MAX_FAILED_CONNECTS = 6;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Follows a run's events until `isEnd`: replayed from after `since`, then live, over the WebSocket
 * (`{"action": "subscribe", "runId", "lastEventId"}`). When the socket drops it reconnects with the
 * last seq it handled, so nothing is lost; what arrives twice is dropped, so nothing is shown twice;
 * a gap is filled from the events endpoint. Answers how many times it reconnected.
 */
export async function followRun(options: FollowOptions): Promise<{ reconnects: number; last: number }> {
  const sequence = new Sequencer(options.since ?? 0);
  let ended = false;

  const handle = async (event: StreamEvent): Promise<void> => {
    if (ended) return;
    let verdict = sequence.accept(event.seq);
    if (verdict === 'gap') {
      await fill();
      verdict = sequence.accept(event.seq);
    }
    if (verdict !== 'next') return;
    await options.onEvent(event);
    if (options.isEnd(event)) ended = true;
  };

  /** Reads the events endpoint from the last seq handled until it has nothing more. */
  async function fill(): Promise<void> {
    while (!ended) {
      const page = await options.fetchEvents(sequence.last);
      const fresh = page.filter((event) => event.seq > sequence.last).sort((a, b) => a.seq - b.seq);
      if (fresh.length === 0) return;
      for (const event of fresh) {
        if (sequence.accept(event.seq) !== 'next') return;
        await options.onEvent(event);
        if (options.isEnd(event)) ended = true;
        if (ended) return;
      }
    }
  }

  if (!options.wsUrl) {
    while (!ended) {
      await fill();
      if (!ended) await sleep(500);
    }
    return { reconnects: 0, last: sequence.last };
  }

  const wsUrl = options.wsUrl;
  const open = options.openSocket ?? ((url: string) => new WebSocket(url) as unknown as Socket);
  let dropHookUsed = false;

  /** One connection, until it closes: 'closed' after it opened, 'failed' when it never did. */
  const connect = () =>
    new Promise<'closed' | 'failed'>((resolve, reject) => {
      const socket = open(`${wsUrl}${wsUrl.includes('?') ? '&' : '?'}token=${encodeURIComponent(options.token)}`);
      let opened = false;
      let ignoring = false;
      let handled = 0;
      let failure: unknown;
      let chain = Promise.resolve();
      const then = (work: () => Promise<void>) => {
        chain = chain.then(work).catch((error: unknown) => {
          failure ??= error;
          ignoring = true;
          socket.close();
        });
      };
      let idle: NodeJS.Timeout | undefined;
      const touch = () => {
        clearTimeout(idle);
        idle = setTimeout(() => {
          then(async () => {
            await fill();
            if (ended) socket.close();
          });
          touch();
        }, options.idleMs ?? 10_000);
      };
      socket.addEventListener('open', () => {
        opened = true;
        touch();
        socket.send(JSON.stringify({ action: 'subscribe', runId: options.runId, lastEventId: sequence.last }));
      });
      socket.addEventListener('message', ({ data }) => {
        if (ignoring) return;
        touch();
        let message: unknown;
        try {
          message = JSON.parse(String(data));
        } catch {
          return;
        }
        const parsed = streamEventSchema.safeParse(message);
        if (!parsed.success) {
          const error = z.object({ type: z.literal('error'), message: z.string() }).safeParse(message);
          if (error.success) {
            failure ??= new ApiError('STREAM_ERROR', error.data.message, 0);
            ignoring = true;
            socket.close();
          }
          return;
        }
        then(async () => {
          // What was queued before a drop is lost with the socket; the reconnect replays it.
          if (ignoring) return;
          await handle(parsed.data);
          handled += 1;
          if (ended) {
            ignoring = true;
            socket.close();
          } else if (options.dropAfter !== undefined && !dropHookUsed && handled >= options.dropAfter) {
            dropHookUsed = true;
            ignoring = true;
            socket.close();
          }
        });
      });
      socket.addEventListener('error', () => undefined);
      socket.addEventListener('close', () => {
        clearTimeout(idle);
        void chain.then(() => (failure === undefined ? resolve(opened ? 'closed' : 'failed') : reject(failure)));
      });
    });

  let reconnects = 0;
  let failures = 0;
  while (!ended) {
    const outcome = await connect();
    if (ended) break;
    failures = outcome === 'failed' ? failures + 1 : 0;
    if (failures >= MAX_FAILED_CONNECTS)
      throw new NetworkError(
        `cannot open the live stream at ${wsUrl}`,
        'is the API up? `capstan runs watch <id>` follows the run again from where it was',
      );
    reconnects += 1;
    options.notice?.(`stream dropped after event ${sequence.last}; reconnecting`);
    await sleep(Math.min(200 * 2 ** failures, 4000));
  }
  return { reconnects, last: sequence.last };
}

import { describe, expect, it } from 'vitest';
import { followRun, Sequencer, type Socket, type StreamEvent } from '../../../cli/follow.js';

const event = (seq: number, type = 'step.output'): StreamEvent => ({
  seq,
  type,
  runId: 'run-1',
  timestamp: '2026-01-01T00:00:00.000Z',
  payload: {},
  meta: {},
});

/**
 * A fake server: every socket replays the log after the subscribe's `lastEventId`, each event
 * once, the way the live stream does. `dropAt` closes the first socket after that many sends.
 */
function fakeServer(log: StreamEvent[], options: { dropAt?: number; duplicate?: boolean } = {}) {
  const subscribes: Array<number | undefined> = [];
  let sockets = 0;
  const openSocket = (url: string): Socket => {
    expect(url).toContain('?token=t%2Bk');
    sockets += 1;
    const mine = sockets;
    const listeners: Record<string, Array<(e: { data: unknown }) => void>> = {};
    let closed = false;
    const emit = (type: string, data?: unknown) => {
      for (const listener of listeners[type] ?? []) listener({ data });
    };
    const close = () => {
      if (closed) return;
      closed = true;
      setTimeout(() => emit('close'), 0);
    };
    setTimeout(() => emit('open'), 0);
    return {
      send(data: string) {
        const { lastEventId } = JSON.parse(data) as { lastEventId?: number };
        subscribes.push(lastEventId);
        let sent = 0;
        for (const e of log.filter((x) => x.seq > (lastEventId ?? 0))) {
          if (closed) return;
          emit('message', JSON.stringify(e));
          if (options.duplicate) emit('message', JSON.stringify(e));
          sent += 1;
          if (mine === 1 && options.dropAt !== undefined && sent === options.dropAt) return close();
        }
      },
      close,
      addEventListener(type: string, listener: (e: { data: unknown }) => void) {
        (listeners[type] ??= []).push(listener);
      },
    } as Socket;
  };
  return { openSocket, subscribes };
}

const follow = (log: StreamEvent[], server: ReturnType<typeof fakeServer>, extra: { dropAfter?: number } = {}) => {
  const seen: number[] = [];
  return {
    seen,
    done: followRun({
      runId: 'run-1',
      token: 't+k',
      wsUrl: 'ws://stack/ws',
      fetchEvents: async (since) => log.filter((e) => e.seq > since),
      onEvent: (e) => {
        seen.push(e.seq);
      },
      isEnd: (e) => e.type === 'run.succeeded',
      openSocket: server.openSocket,
      idleMs: 60_000,
      ...extra,
    }),
  };
};

const LOG = [...[1, 2, 3, 4, 5, 6, 7].map((n) => event(n)), event(8, 'run.succeeded')];

describe('Sequencer', () => {
  it('accepts the next seq, drops one seen already and reports a gap', () => {
    const s = new Sequencer(2);
    expect([s.accept(3), s.accept(3), s.accept(2), s.accept(5), s.last]).toEqual([
      'next',
      'duplicate',
      'duplicate',
      'gap',
      3,
    ]);
  });
});

describe('followRun', () => {
  it('reconnects with the last seq it handled when the server drops the socket, losing and repeating nothing', async () => {
    const server = fakeServer(LOG, { dropAt: 3 });
    const { seen, done } = follow(LOG, server);
    expect(await done).toEqual({ reconnects: 1, last: 8 });
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(server.subscribes).toEqual([0, 3]);
  });

  it('drops the socket itself after N events with the test hook and resumes from there', async () => {
    const server = fakeServer(LOG);
    const { seen, done } = follow(LOG, server, { dropAfter: 5 });
    expect((await done).reconnects).toBe(1);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(server.subscribes).toEqual([0, 5]);
  });

  it('shows an event delivered twice once', async () => {
    const { seen, done } = follow(LOG, fakeServer(LOG, { duplicate: true }));
    await done;
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('fills a gap in the stream from the events endpoint', async () => {
    const holey = LOG.filter((e) => e.seq !== 4);
    const { seen, done } = follow(LOG, fakeServer(holey));
    await done;
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('polls the events endpoint when no WebSocket address is known', async () => {
    const seen: number[] = [];
    await followRun({
      runId: 'run-1',
      token: 't',
      fetchEvents: async (since) => LOG.filter((e) => e.seq > since).slice(0, 3),
      onEvent: (e) => {
        seen.push(e.seq);
      },
      isEnd: (e) => e.type === 'run.succeeded',
    });
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
});

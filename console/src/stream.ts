import type { Api, RunEvent } from './api.js';

type Listener = (events: readonly RunEvent[]) => void;

interface Subscription {
  /** The highest seq handed to the listeners: a reconnect replays from after it. */
  last: number;
  readonly listeners: Set<Listener>;
  /** A gap is being filled from the events endpoint. */
  filling: boolean;
}

/** How long events gather before the listeners see them: one render per batch, not per event. */
const BATCH_MS = 50;

/**
 * The console's one WebSocket. Any number of runs are subscribed over it
 * (`{"action": "subscribe", "runId", "lastEventId"}`); each run's events reach its listeners
 * once, in `seq` order, in batches. When the socket drops it reconnects with backoff and
 * subscribes every run again from the last seq handled, so nothing is lost and nothing is
 * shown twice; a gap is filled from `GET /v1/runs/{id}/events`.
 */
export class EventStream {
  private socket: WebSocket | undefined;
  private readonly subscriptions = new Map<string, Subscription>();
  private readonly pending = new Map<string, RunEvent[]>();
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  private closed = false;
  /** How many times the socket was opened again after a drop (shown, and read by tests). */
  reconnects = 0;
  onState: (state: 'open' | 'reconnecting') => void = () => undefined;

  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly api: Api,
  ) {}

  /** Follows a run; answers the function that stops following it. */
  subscribe(runId: string, listener: Listener, since = 0): () => void {
    let subscription = this.subscriptions.get(runId);
    if (!subscription) {
      subscription = { last: since, listeners: new Set(), filling: false };
      this.subscriptions.set(runId, subscription);
      this.send(runId, subscription.last);
    }
    subscription.listeners.add(listener);
    this.ensureOpen();
    return () => {
      subscription.listeners.delete(listener);
      // The server keeps sending until the socket closes; unknown runs' events are dropped here.
      if (subscription.listeners.size === 0) this.subscriptions.delete(runId);
    };
  }

  /** Drops the socket (a test hook for the replay after a reconnect). */
  drop(): void {
    this.socket?.close();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.flushTimer);
    this.socket?.close();
  }

  private ensureOpen(): void {
    if (this.socket || this.closed) return;
    const socket = new WebSocket(
      `${this.url}${this.url.includes('?') ? '&' : '?'}token=${encodeURIComponent(this.token)}`,
    );
    this.socket = socket;
    let opened = false;
    socket.addEventListener('open', () => {
      opened = true;
      this.failures = 0;
      this.onState('open');
      for (const [runId, subscription] of this.subscriptions) this.send(runId, subscription.last);
    });
    socket.addEventListener('message', (message) => this.receive(String(message.data)));
    socket.addEventListener('close', () => {
      this.socket = undefined;
      if (this.closed) return;
      this.failures = opened ? 0 : this.failures + 1;
      this.onState('reconnecting');
      this.retryTimer = setTimeout(
        () => {
          this.reconnects += 1;
          this.ensureOpen();
        },
        Math.min(250 * 2 ** this.failures, 5000),
      );
    });
  }

  private send(runId: string, last: number): void {
    if (this.socket?.readyState !== WebSocket.OPEN) return;
    this.socket.send(JSON.stringify({ action: 'subscribe', runId, lastEventId: last }));
  }

  private receive(data: string): void {
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    const event = message as Partial<RunEvent>;
    if (typeof event.runId !== 'string' || typeof event.seq !== 'number') return;
    const subscription = this.subscriptions.get(event.runId);
    if (!subscription || event.seq <= subscription.last) return;
    if (event.seq !== subscription.last + 1) {
      void this.fill(event.runId, subscription);
      return;
    }
    subscription.last = event.seq;
    this.queue(event.runId, [event as RunEvent]);
  }

  /** Reads what the socket skipped from the events endpoint. */
  private async fill(runId: string, subscription: Subscription): Promise<void> {
    if (subscription.filling) return;
    subscription.filling = true;
    try {
      for (;;) {
        const { events } = await this.api.events(runId, subscription.last);
        const fresh = events.filter((e) => e.seq > subscription.last).sort((a, b) => a.seq - b.seq);
        const ordered: RunEvent[] = [];
        for (const event of fresh) {
          if (event.seq !== subscription.last + 1) break;
          subscription.last = event.seq;
          ordered.push(event);
        }
        if (ordered.length > 0) this.queue(runId, ordered);
        if (ordered.length < 100) return;
      }
    } finally {
      subscription.filling = false;
    }
  }

  private queue(runId: string, events: RunEvent[]): void {
    const list = this.pending.get(runId) ?? [];
    list.push(...events);
    this.pending.set(runId, list);
    this.flushTimer ??= setTimeout(() => this.flush(), BATCH_MS);
  }

  private flush(): void {
    this.flushTimer = undefined;
    const batches = [...this.pending];
    this.pending.clear();
    for (const [runId, events] of batches) {
      for (const listener of this.subscriptions.get(runId)?.listeners ?? []) listener(events);
    }
  }
}

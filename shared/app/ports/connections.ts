import type { Principal } from '../../domain/entities.js';

/** An authorised WebSocket connection. */
export interface ConnectionStore {
  /** Records an authorised connection and who opened it. */
  open(connectionId: string, principal: Principal, now: Date): Promise<void>;
  /** Removes a connection and every subscription it had. */
  remove(connectionId: string): Promise<void>;
  /** Connections open at `now` (not yet removed or aged out), for the sessions gauge. */
  countOpen(now: Date): Promise<number>;
}

export interface Subscription {
  readonly connectionId: string;
  readonly runId: string;
  readonly tenantId: string;
  /** The last seq this connection has been sent. */
  readonly delivered: number;
}

/**
 * Subscriptions of connections to runs, with a per-subscription delivery lock: whoever holds it
 * sends the run's events in order from `delivered`; anyone else marks the subscription dirty and
 * the holder reads the log again before letting go.
 */
export interface SubscriptionStore {
  subscribe(sub: Subscription, now: Date): Promise<void>;
  /**
   * The connections subscribed to each of these runs of one tenant (runs without any are absent):
   * one read for all of them, so a batch of events costs a read per tenant, not per run.
   */
  subscribers(tenantId: string, runIds: readonly string[]): Promise<Map<string, string[]>>;
  lock(connectionId: string, runId: string, owner: string, now: Date): Promise<'held' | 'busy' | 'gone'>;
  delivered(connectionId: string, runId: string): Promise<number | undefined>;
  /** 'lost' when the caller no longer holds the lock (the connection went away, or the lock expired and was taken). */
  markDelivered(connectionId: string, runId: string, owner: string, seq: number): Promise<'marked' | 'lost'>;
  /** 'released' also when the lock was no longer the caller's: its new holder, if any, delivers. */
  unlock(connectionId: string, runId: string, owner: string): Promise<'released' | 'dirty'>;
}

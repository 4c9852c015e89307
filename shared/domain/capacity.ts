/**
 * How a profile's worker pool follows its queue: target tracking on backlog per worker, where the
 * backlog is the messages waiting plus the ones in flight, held at `backlogPerWorker`. The CDK
 * stack gives each Fargate service this policy (Application Auto Scaling); the local scaler
 * applies the same rule to its worker processes. Pure: the readings are given.
 */

/** The pool's bounds and the backlog one worker is expected to hold. */
export interface PoolBounds {
  readonly minWorkers: number;
  readonly maxWorkers: number;
  readonly backlogPerWorker: number;
}

/** Backlog per worker; with no worker running, the whole backlog (the stack's metric does the same). */
export const backlogPerWorker = (backlog: number, workers: number): number =>
  workers > 0 ? backlog / workers : backlog;

/** The count target tracking aims for: enough workers for the target backlog each, within bounds. */
export function desiredPoolSize(bounds: PoolBounds, backlog: number): number {
  const wanted = Math.ceil(backlog / bounds.backlogPerWorker);
  return Math.min(bounds.maxWorkers, Math.max(bounds.minWorkers, wanted));
}

/**
 * The count a pool of `current` moves to now: out to the desired count at once, in by one worker
 * at a time (as target tracking scales in conservatively; a worker that stops drains its step).
 */
export function nextPoolSize(bounds: PoolBounds, current: number, backlog: number): number {
  const desired = desiredPoolSize(bounds, backlog);
  return desired >= current ? desired : Math.max(desired, current - 1);
}

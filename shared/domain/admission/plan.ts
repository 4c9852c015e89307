import type { Priority } from '../entities.js';
import { admitThrough, type BreakerState } from './breaker.js';
import type { Limit } from './limits.js';
import { activeLimit } from './limits.js';
import { type Bucket, HOUR_MS, MINUTE_MS, type Quota, refill, refillPerMs, windowOf } from './quotas.js';

/** A counter a run takes one of at admission; refused when it already holds `max`. */
export interface CounterTake {
  readonly name: string;
  readonly max: number;
  /** Window counters are kept for a while, then left to expire. */
  readonly expiresAt?: string;
  /** Released again when the run ends (active counters); window counters are not. */
  readonly held: boolean;
}

/** A token taken from a bucket, if it still stands as it was read. */
export interface BucketTake {
  readonly name: string;
  readonly was: Bucket | undefined;
  readonly now: Bucket;
}

/** Which limit held a run back. */
export { LIMIT_NAMES, type LimitName } from './limit-names.js';
import type { LimitName } from './limit-names.js';

export type AdmissionPlan =
  | {
      readonly admit: true;
      readonly counters: readonly CounterTake[];
      readonly buckets: readonly BucketTake[];
      /** An open breaker past its cooldown lets this run through as its probe (half-open). */
      readonly probe?: { readonly was: BreakerState; readonly next: BreakerState };
    }
  | { readonly admit: false; readonly limit: LimitName; readonly source?: string; readonly nextEligibleAt: string };

/** What admission knows of a run: its tenant, runbook, priority and what started it. */
export interface Candidate {
  readonly runbookId: string;
  readonly priority: Priority;
  /** `api`, `eventbridge:<source>` or `webhook:<source>`. */
  readonly source: string;
  /** The backlog of the queue its steps go to, when admission watches it (backpressure). */
  readonly backlog?: QueueBacklog;
}

/** A sandbox profile's queue as admission sees it: messages waiting, and the bound past which it holds runs. */
export interface QueueBacklog {
  readonly profile: string;
  readonly depth: number;
  readonly max: number;
}

/** The controls in force for one tenant, as read at once. */
export interface Controls {
  readonly quotas: readonly Quota[];
  readonly limits: readonly Limit[];
  readonly breakers: ReadonlyMap<string, BreakerState>;
  readonly buckets: ReadonlyMap<string, Bucket>;
}

/** How soon a run held by a count (not a clock) is looked at again. */
export const RECHECK_MS = 5_000;

export const activeCounter = (scope: string) => `active#${scope}`;
export const emergencyCounter = (scope: string) => `emergency#${scope}`;
export const bucketName = (scope: string) => `bucket#${scope}`;

/**
 * Decides whether a run may start now, and if so which counters and tokens it takes; the store
 * takes them with conditions, so a refusal there is a `maxActive` (or window) refusal after all.
 * Pure: every input is given.
 */
export function planAdmission(
  candidate: Candidate & { readonly runId: string },
  controls: Controls,
  now: Date,
): AdmissionPlan {
  const iso = now.toISOString();
  const recheck = new Date(now.getTime() + RECHECK_MS).toISOString();
  for (const source of [candidate.runbookId, candidate.source]) {
    const limit = activeLimit(controls.limits, source, now);
    if (limit?.kind === 'pause') return { admit: false, limit: 'paused', source, nextEligibleAt: recheck };
  }
  const breaker = controls.breakers.get(candidate.runbookId);
  if (breaker?.state === 'open' && breaker.openUntil > iso)
    return { admit: false, limit: 'breaker', source: candidate.runbookId, nextEligibleAt: breaker.openUntil };
  if (breaker?.state === 'half_open')
    return { admit: false, limit: 'breaker', source: candidate.runbookId, nextEligibleAt: recheck };
  // Emergency runs are what a saturated fleet must still run; everything else waits for it to drain.
  const { backlog } = candidate;
  if (backlog && candidate.priority !== 'emergency' && backlog.depth >= backlog.max)
    return { admit: false, limit: 'backlog', source: backlog.profile, nextEligibleAt: recheck };
  const through = breaker && admitThrough(breaker, candidate.runId, now);
  const counters: CounterTake[] = [];
  const buckets: BucketTake[] = [];
  for (const source of [candidate.runbookId, candidate.source]) {
    const limit = activeLimit(controls.limits, source, now);
    if (limit?.kind === 'throttle') {
      const window = windowOf(now, MINUTE_MS);
      counters.push({
        name: `rate#${source}#${window.start}`,
        max: limit.maxPerMinute,
        expiresAt: window.next,
        held: false,
      });
    }
  }
  const emergency = candidate.priority === 'emergency';
  for (const quota of controls.quotas.filter((q) => q.runbook === '*' || q.runbook === candidate.runbookId)) {
    const scope = quota.runbook;
    if (emergency && quota.emergency)
      counters.push({ name: emergencyCounter(scope), max: quota.emergency.maxActive, held: true });
    else if (quota.maxActive !== undefined)
      counters.push({ name: activeCounter(scope), max: quota.maxActive, held: true });
    if (quota.maxPerHour !== undefined) {
      const window = windowOf(now, HOUR_MS);
      counters.push({
        name: `hour#${scope}#${window.start}`,
        max: quota.maxPerHour,
        expiresAt: window.next,
        held: false,
      });
    }
    if (quota.burst !== undefined) {
      const name = bucketName(scope);
      const was = controls.buckets.get(name);
      const perMs = refillPerMs(quota);
      const tokens = refill(was, quota.burst, perMs, now);
      if (tokens < 1)
        return {
          admit: false,
          limit: 'burst',
          source: scope,
          nextEligibleAt: new Date(now.getTime() + Math.ceil((1 - tokens) / perMs)).toISOString(),
        };
      buckets.push({ name, was, now: { tokens: tokens - 1, at: iso } });
    }
  }
  return { admit: true, counters, buckets, ...(breaker && through && { probe: { was: breaker, next: through } }) };
}

/** When a run refused by a counter may try again: the next window, or a recheck for active counts. */
export function refusedBy(counter: CounterTake, now: Date): { limit: LimitName; nextEligibleAt: string } {
  const [kind] = counter.name.split('#');
  if (kind === 'hour') return { limit: 'maxPerHour', nextEligibleAt: counter.expiresAt ?? now.toISOString() };
  if (kind === 'rate') return { limit: 'throttle', nextEligibleAt: counter.expiresAt ?? now.toISOString() };
  return {
    limit: kind === 'emergency' ? 'emergency.maxActive' : 'maxActive',
    nextEligibleAt: new Date(now.getTime() + RECHECK_MS).toISOString(),
  };
}

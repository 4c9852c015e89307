import { z } from 'zod';

/** Defaults of seed 004 section 4.4: open at 50% failures over at least 10 runs. */
export const BREAKER_DEFAULTS = { threshold: 0.5, minRuns: 10, window: 20, cooldownMs: 60_000 } as const;
export type BreakerSettings = {
  readonly threshold: number;
  readonly minRuns: number;
  readonly window: number;
  readonly cooldownMs: number;
};

export const breakerStateSchema = z.strictObject({
  runbookId: z.string(),
  state: z.enum(['closed', 'open', 'half_open']),
  /** The latest outcomes, newest last, true for a success; at most `window`. */
  outcomes: z.array(z.boolean()),
  openedAt: z.iso.datetime().optional(),
  /** Until when an open breaker refuses runs; after it, one run goes through (half-open). */
  openUntil: z.string().default(''),
  /** The run let through while half-open. */
  probeRunId: z.string().optional(),
  updatedAt: z.iso.datetime(),
});
export type BreakerState = z.infer<typeof breakerStateSchema>;

export const closedBreaker = (runbookId: string, now: Date): BreakerState => ({
  runbookId,
  state: 'closed',
  outcomes: [],
  openUntil: '',
  updatedAt: now.toISOString(),
});

/** A transition worth an event: the breaker opened, half-opened or closed. */
export type BreakerChange = 'opened' | 'half_opened' | 'closed' | undefined;

/**
 * Records a run's outcome. Closed: opens when the failure rate over the window reaches the
 * threshold with at least `minRuns` outcomes. Half-open: the probe's success closes, its failure
 * re-opens for another cooldown. Open: runs admitted before it opened end without moving it, and
 * so does a run other than the probe while half-open (`runId` names the run that ended).
 */
export function recordOutcome(
  breaker: BreakerState,
  succeeded: boolean,
  now: Date,
  settings: BreakerSettings = BREAKER_DEFAULTS,
  runId?: string,
): { next: BreakerState; change: BreakerChange } {
  const iso = now.toISOString();
  const reopen = (): BreakerState => ({
    ...breaker,
    state: 'open',
    outcomes: [],
    openedAt: iso,
    openUntil: new Date(now.getTime() + settings.cooldownMs).toISOString(),
    probeRunId: undefined,
    updatedAt: iso,
  });
  const notTheProbe = runId !== undefined && breaker.probeRunId !== undefined && runId !== breaker.probeRunId;
  if (breaker.state === 'open' || (breaker.state === 'half_open' && notTheProbe))
    return { next: breaker, change: undefined };
  if (breaker.state === 'half_open') {
    if (succeeded) return { next: { ...closedBreaker(breaker.runbookId, now) }, change: 'closed' };
    return { next: reopen(), change: 'opened' };
  }
  // A success on a window already full of successes leaves it as it was: nothing to store, so a
  // healthy runbook's runs do not each write its breaker.
  if (succeeded && breaker.outcomes.length >= settings.window && breaker.outcomes.every(Boolean))
    return { next: breaker, change: undefined };
  const outcomes = [...breaker.outcomes, succeeded].slice(-settings.window);
  const failures = outcomes.filter((ok) => !ok).length;
  if (outcomes.length >= settings.minRuns && failures / outcomes.length >= settings.threshold)
    return { next: reopen(), change: 'opened' };
  return { next: { ...breaker, outcomes, updatedAt: iso }, change: undefined };
}

/** A half-open breaker whose probe was cancelled goes back to open, due at once, so the next run probes. */
export function probeWithdrawn(breaker: BreakerState, runId: string, now: Date): BreakerState | undefined {
  if (breaker.state !== 'half_open' || breaker.probeRunId !== runId) return undefined;
  return {
    ...breaker,
    state: 'open',
    openUntil: now.toISOString(),
    probeRunId: undefined,
    updatedAt: now.toISOString(),
  };
}

/** An open breaker whose cooldown passed lets one run through: it becomes half-open. */
export function admitThrough(breaker: BreakerState, runId: string, now: Date): BreakerState | undefined {
  if (breaker.state === 'open' && breaker.openUntil <= now.toISOString())
    return { ...breaker, state: 'half_open', probeRunId: runId, updatedAt: now.toISOString() };
  return undefined;
}

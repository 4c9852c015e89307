import { z } from 'zod';
import type { Phase, Runbook, Step } from './runbook.js';

/**
 * Rate control of one fan-out unit (a barrier step, or a pipeline phase), resolved against its
 * number of targets (SSM Run Command semantics): at most `maxConcurrency` targets in flight;
 * once more than `haltAfter` have failed nothing new starts, in-flight targets finish and the
 * unit fails; the unit succeeds when at most `tolerated` failed.
 */
export const rateLimitsSchema = z.strictObject({
  maxConcurrency: z.number().int().positive(),
  ramp: z.boolean(),
  haltAfter: z.number().int().min(0),
  tolerated: z.number().int().min(0),
});
export type RateLimits = z.infer<typeof rateLimitsSchema>;

/** At most this many targets per unit: the resolved list is kept on one item. */
export const MAX_TARGETS = 2000;

/** `3` stays 3; `"25%"` of `total` rounds up, and is at least `min`. */
export function countOf(value: number | string, total: number, min: number): number {
  if (typeof value === 'number') return value;
  const percent = Number.parseInt(value, 10);
  return Math.max(min, Math.ceil((total * percent) / 100));
}

type Limited =
  Pick<Step, 'max_concurrency' | 'max_errors' | 'ramp'> | Pick<Phase, 'max_concurrency' | 'max_errors' | 'ramp'>;

/**
 * The limits of a unit with `total` targets. Without `max_errors` the run's strategy decides:
 * fail-fast stops new targets at the first failure; continue lets every target run. Either way
 * one failure fails the unit unless `max_errors` tolerates it.
 */
export function rateLimitsOf(unit: Limited, strategy: Runbook['strategy'], total: number): RateLimits {
  const all = Math.max(1, total);
  const maxErrors = unit.max_errors === undefined ? undefined : countOf(unit.max_errors, total, 0);
  return {
    maxConcurrency: unit.max_concurrency === undefined ? all : Math.min(all, countOf(unit.max_concurrency, total, 1)),
    ramp: unit.ramp === 'exponential',
    haltAfter: maxErrors ?? (strategy === 'fail-fast' ? 0 : total),
    tolerated: maxErrors ?? 0,
  };
}

/**
 * How many targets may have started once `done` have ended. Without a ramp, `maxConcurrency` in
 * flight at any time. With `ramp: exponential` the targets start in waves of 1, 2, 4, ..., each
 * when the previous has ended, until a wave would reach `maxConcurrency`; from then on as many
 * as that are in flight at any time.
 */
export function startedAllowed(limits: RateLimits, done: number): number {
  if (limits.ramp) {
    let boundary = 0;
    for (let wave = 1; wave < limits.maxConcurrency; wave *= 2) {
      boundary += wave;
      if (done < boundary) return boundary;
    }
  }
  return done + limits.maxConcurrency;
}

/** Where a unit's targets stand, as its aggregate counts them. */
export interface TargetCounts {
  readonly total: number;
  /** Targets given an execution so far (in list order). */
  readonly released: number;
  /** Targets ended, skipped ones included. */
  readonly done: number;
  readonly failed: number;
}

/** What the releaser does next: start `count` more targets, stop the rest, or nothing. */
export type Release =
  | { readonly kind: 'start'; readonly count: number }
  | { readonly kind: 'halt'; readonly skipped: number }
  | { readonly kind: 'none' };

export function nextRelease(limits: RateLimits, counts: TargetCounts, stopping = false): Release {
  const waiting = counts.total - counts.released;
  if (waiting <= 0) return { kind: 'none' };
  if (stopping || counts.failed > limits.haltAfter) return { kind: 'halt', skipped: waiting };
  const count = Math.min(waiting, startedAllowed(limits, counts.done) - counts.released);
  return count > 0 ? { kind: 'start', count } : { kind: 'none' };
}

/**
 * The waves a unit would run in if every target took as long (for a dry run): the first wave,
 * then one more each time the previous ends, each as large as the cap allows.
 */
export function wavesOf(limits: RateLimits, total: number): number[] {
  const waves: number[] = [];
  let done = 0;
  while (done < total) {
    const size = Math.min(total - done, startedAllowed(limits, done) - done);
    waves.push(size);
    done += size;
  }
  return waves;
}

/** What one target does next in a pipeline phase, after one of its sub-steps ended. */
export type PipelineNext =
  | {
      readonly kind: 'run';
      readonly stepId: string;
      readonly attempt: number;
      readonly failedBefore: boolean;
      /** The failed step's own rollback, on this target, before the failure path goes on. */
      readonly rollback?: true;
    }
  | { readonly kind: 'done'; readonly succeeded: boolean };

/**
 * A pipeline phase's scheduler for one target: a failed sub-step is tried again while it has
 * retries and the error allows; a sub-step that failed for good runs its own rollback on this
 * target; then the next sub-step whose condition holds for this target (`on_success`: nothing
 * failed on it so far in the phase; `on_failure`: something did; `always`).
 */
export function pipelineNext(
  phase: Pick<Phase, 'steps'>,
  ended: {
    readonly kind?: 'step' | 'rollback';
    readonly stepId: string;
    readonly attempt: number;
    readonly succeeded: boolean;
    readonly retryable?: boolean;
    readonly failedBefore: boolean;
  },
): PipelineNext {
  const index = phase.steps.findIndex((s) => s.id === ended.stepId);
  const step = phase.steps[index];
  if (!step) throw new Error(`step ${ended.stepId} is not in the phase`);
  if (ended.kind === 'rollback') return firstRunnable(phase, index + 1, true);
  if (!ended.succeeded && ended.retryable !== false && ended.attempt <= step.retries)
    return { kind: 'run', stepId: step.id, attempt: ended.attempt + 1, failedBefore: ended.failedBefore };
  if (!ended.succeeded && step.rollback)
    return { kind: 'run', stepId: step.id, attempt: 1, failedBefore: true, rollback: true };
  const failed = ended.failedBefore || !ended.succeeded;
  return firstRunnable(phase, index + 1, failed);
}

/** The first sub-step from `from` whose condition holds for a target that has (or has not) failed. */
export function firstRunnable(phase: Pick<Phase, 'steps'>, from: number, failed: boolean): PipelineNext {
  for (const step of phase.steps.slice(from)) {
    const runs = step.condition === 'always' || (step.condition === 'on_failure' ? failed : !failed);
    if (runs) return { kind: 'run', stepId: step.id, attempt: 1, failedBefore: failed };
  }
  return { kind: 'done', succeeded: !failed };
}

/** The unit a step belongs to: itself, or the pipeline phase it is in (named by its first step). */
export function unitOf(
  runbook: Pick<Runbook, 'phases'>,
  stepId: string,
): { phase: Phase; pipeline: boolean; headStepId: string } | undefined {
  for (const phase of runbook.phases) {
    if (!phase.steps.some((s) => s.id === stepId)) continue;
    const pipeline = phase.mode === 'pipeline';
    return { phase, pipeline, headStepId: pipeline ? (phase.steps[0]?.id ?? stepId) : stepId };
  }
  return undefined;
}

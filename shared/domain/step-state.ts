import { sha256Hex } from './canonical.js';
import type { ErrorInfo, StepExecution } from './entities.js';
import type { Step } from './runbook.js';
import { stepExecutionStateMachine } from './statuses.js';
import type { Aggregate } from './step-records.js';

/** The executions the planner reads. */
export type ExecutionView = Pick<
  StepExecution,
  'stepId' | 'kind' | 'attempt' | 'status' | 'startedAt' | 'endedAt' | 'error' | 'targetId'
>;

/** How a step stands, derived from its step executions. */
export type StepState =
  | { readonly kind: 'not_started' }
  | { readonly kind: 'in_flight'; readonly attempt: number }
  | { readonly kind: 'succeeded'; readonly attempt: number }
  | { readonly kind: 'retry'; readonly attempt: number; readonly after: Date; readonly error?: ErrorInfo }
  | { readonly kind: 'failed'; readonly attempt: number; readonly error?: ErrorInfo };

/** What the planner reads of a step aggregate. */
export type UnitCount = Pick<
  Aggregate,
  | 'kind'
  | 'stepId'
  | 'attempt'
  | 'total'
  | 'failed'
  | 'completed'
  | 'targets'
  | 'skipped'
  | 'limits'
  | 'error'
  | 'pipeline'
>;

/** Retry back-off: exponential from 1 s, capped at 5 minutes, with full jitter. */
const BACKOFF_BASE_MS = 1000;
const BACKOFF_CAP_MS = 300_000;

/**
 * The delay before attempt `attempt + 1`: full jitter over an exponential ceiling. The jitter is
 * derived from the run, step and attempt, so planning the same state twice decides the same.
 */
export function retryDelayMs(runId: string, stepId: string, attempt: number): number {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1));
  const fraction = Number.parseInt(sha256Hex(`${runId}/${stepId}/${attempt}`).slice(0, 8), 16) / 0xffffffff;
  return Math.max(1000, Math.round(ceiling * fraction));
}

/** The state of one step (or its rollback) from the executions recorded for it. */
export function stepState(
  runId: string,
  step: Pick<Step, 'id' | 'retries'>,
  kind: 'step' | 'rollback',
  executions: readonly ExecutionView[],
  aggregates: readonly UnitCount[] = [],
): StepState {
  const units = aggregates.filter((a) => a.kind === kind && a.stepId === step.id && a.targets !== undefined);
  if (units.length > 0) return unitState(runId, step, kind, executions, units);
  const mine = executions.filter((e) => e.stepId === step.id && e.kind === kind);
  if (mine.length === 0) return { kind: 'not_started' };
  const attempt = Math.max(...mine.map((e) => e.attempt));
  const latest = mine.filter((e) => e.attempt === attempt);
  if (latest.some((e) => !stepExecutionStateMachine.isTerminal(e.status))) return { kind: 'in_flight', attempt };
  if (latest.every((e) => e.status === 'succeeded')) return { kind: 'succeeded', attempt };
  const failure = latest.find((e) => e.status !== 'succeeded');
  const error = failure?.error;
  const retries = kind === 'step' ? step.retries : 0;
  if (attempt <= retries && error?.retryable !== false && failure?.status !== 'cancelled') {
    const ended = Math.max(...latest.map((e) => (e.endedAt ? Date.parse(e.endedAt) : 0)));
    return { kind: 'retry', attempt, after: new Date(ended + retryDelayMs(runId, step.id, attempt)), error };
  }
  return { kind: 'failed', attempt, error };
}

/**
 * The state of a fan-out unit (a step over targets, or a pipeline phase) from its latest
 * aggregate: in flight until it completes; then succeeded when no more targets failed (or were
 * skipped) than `max_errors` tolerates. A retry dispatches the targets that did not succeed;
 * a pipeline's sub-steps retry on their own, so the phase does not.
 */
function unitState(
  runId: string,
  step: Pick<Step, 'id' | 'retries'>,
  kind: 'step' | 'rollback',
  executions: readonly ExecutionView[],
  units: readonly UnitCount[],
): StepState {
  const latest = units.reduce((a, b) => (b.attempt > a.attempt ? b : a));
  const { attempt } = latest;
  if (!latest.completed) return { kind: 'in_flight', attempt };
  const failures = latest.failed + (latest.skipped ?? 0);
  if (failures <= (latest.limits?.tolerated ?? 0) && !latest.error) return { kind: 'succeeded', attempt };
  const failedExecution = executions.find(
    (e) =>
      e.kind === kind &&
      e.attempt === attempt &&
      e.stepId === step.id &&
      stepExecutionStateMachine.isTerminal(e.status) &&
      e.status !== 'succeeded',
  );
  const error: ErrorInfo = latest.error ?? {
    code: 'TARGETS_FAILED',
    message:
      `${latest.failed} of ${latest.total} target(s) failed` +
      (latest.skipped ? `, ${latest.skipped} not started` : '') +
      (latest.limits && latest.limits.tolerated > 0 ? ` (max_errors ${latest.limits.tolerated})` : '') +
      (failedExecution?.error ? `; ${failedExecution.targetId}: ${failedExecution.error.message}` : ''),
    retryable: failedExecution?.error?.retryable !== false,
  };
  const retries = kind === 'step' && !latest.pipeline ? step.retries : 0;
  if (attempt <= retries && error.retryable !== false && !latest.error) {
    const ended = Math.max(
      0,
      ...executions
        .filter((e) => e.kind === kind && e.stepId === step.id && e.attempt === attempt)
        .map((e) => (e.endedAt ? Date.parse(e.endedAt) : 0)),
    );
    return { kind: 'retry', attempt, after: new Date(ended + retryDelayMs(runId, step.id, attempt)), error };
  }
  return { kind: 'failed', attempt, error };
}

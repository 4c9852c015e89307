import type { RunStore } from './ports/runs.js';
import { writes } from './ports/writes.js';
import { StaleWriteError } from '../domain/errors.js';
import type { ErrorInfo, StepExecution } from '../domain/entities.js';
import { draft } from './drafts.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import type { Clock } from './ports.js';
import { claimAndResume } from './completion.js';

export interface UnsentDeps {
  readonly runs: RunStore;
  readonly callbacks: TaskCallbacks;
  readonly clock: Clock;
}

/** How executions that never reached a worker end. */
export interface UnsentOutcome {
  readonly status: 'failed' | 'cancelled';
  readonly error: ErrorInfo;
}

/** How a step execution ends when its run is cancelled before a worker took it. */
export const CANCELLED_UNSENT: UnsentOutcome = {
  status: 'cancelled',
  error: { code: 'CANCELLED', message: 'the run was cancelled before a worker took this step', retryable: false },
};

/** Executions per transaction: each is an update and an event, beside the run and its aggregate. */
const CHUNK = 40;

/**
 * Ends the step executions of a run that no worker holds yet (still `pending`) and that
 * `outcomeOf` gives an outcome: failed for good when their command cannot be carried, or cancelled with the run. Each
 * chunk of ends, their `step.failed` events and the count into their step's aggregate is one
 * transaction; when that completes a step, the Dispatch task waiting on it resumes, exactly once.
 * An execution a worker leased meanwhile is left to that worker. Resolves how many ended.
 */
export async function endUnsent(
  deps: UnsentDeps,
  runId: string,
  outcomeOf: (execution: StepExecution) => UnsentOutcome | undefined,
): Promise<number> {
  let ended = 0;
  for (let pass = 0; pass < 5; pass++) {
    const targets = (await deps.runs.executions(runId)).flatMap((e) => {
      const outcome = e.status === 'pending' ? outcomeOf(e) : undefined;
      return outcome ? [{ ...e, status: outcome.status, error: outcome.error }] : [];
    });
    if (targets.length === 0) break;
    const steps = new Map<string, StepExecution[]>();
    for (const e of targets) {
      const unit = countsInto(e);
      const key = `${unit.kind}/${unit.stepId}/${unit.attempt}`;
      steps.set(key, [...(steps.get(key) ?? []), e]);
    }
    const now = deps.clock.now().toISOString();
    try {
      for (const group of steps.values()) {
        const head = group[0];
        if (!head) continue;
        const first = countsInto(head);
        const aggregate = await deps.runs.aggregate(runId, first.kind, first.stepId, first.attempt);
        for (let i = 0; i < group.length; i += CHUNK) {
          const chunk = group.slice(i, i + CHUNK);
          await deps.runs.mutate(runId, () => ({
            events: chunk.map((e) =>
              draft(
                'step.failed',
                now,
                { kind: e.kind, attempt: e.attempt, outcome: e.status, error: e.error ?? null },
                { stepId: e.stepId, targetId: e.targetId },
              ),
            ),
            writes: [
              ...chunk.map((e) => writes.updateExecution({ ...e, endedAt: now }, ['pending'])),
              ...(aggregate
                ? [writes.countUnsent(runId, first.kind, first.stepId, first.attempt, chunk.length, aggregate.total)]
                : []),
            ],
          }));
          ended += chunk.length;
        }
        await claimAndResume(deps, { runId, kind: first.kind, stepId: first.stepId, attempt: first.attempt });
      }
      break;
    } catch (error) {
      // A worker leased one of them first: read again and end the ones still pending.
      if (!(error instanceof StaleWriteError)) throw error;
    }
  }
  return ended;
}

/** The aggregate an execution counts into: its step attempt's, or its pipeline phase's (a rollback inside a phase too). */
export function countsInto(e: Pick<StepExecution, 'kind' | 'stepId' | 'attempt' | 'pipeline'>): {
  kind: 'step' | 'rollback';
  stepId: string;
  attempt: number;
} {
  return e.pipeline
    ? { kind: 'step', stepId: e.pipeline.head, attempt: 1 }
    : { kind: e.kind, stepId: e.stepId, attempt: e.attempt };
}

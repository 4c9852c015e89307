import type { TaskCallbacks } from './ports/interpreter.js';
import type { RunStore } from './ports/runs.js';

/** A step attempt whose aggregate decides when the interpreter goes on. */
export interface AttemptRef {
  readonly runId: string;
  readonly kind: string;
  readonly stepId: string;
  readonly attempt: number;
}

/** What the interpreter's waiting Dispatch task is resumed with when its step completes. */
export const completionOutput = (ref: AttemptRef, counts: { succeeded: number; failed: number }) => ({
  stepId: ref.stepId,
  kind: ref.kind,
  attempt: ref.attempt,
  succeeded: counts.succeeded,
  failed: counts.failed,
});

/**
 * Claims the attempt's completion once every execution is counted and resumes the task waiting on
 * it: exactly one caller claims it. Resolves whether this caller did.
 */
export async function claimAndResume(
  deps: { readonly runs: Pick<RunStore, 'claimCompletion'>; readonly callbacks: TaskCallbacks },
  ref: AttemptRef,
): Promise<boolean> {
  const completed = await deps.runs.claimCompletion(ref.runId, ref.kind, ref.stepId, ref.attempt);
  if (!completed) return false;
  await deps.callbacks.succeed(completed.taskToken, completionOutput(ref, completed));
  return true;
}

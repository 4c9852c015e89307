import type { RunStore } from './ports/runs.js';
import type { Json } from '../domain/canonical.js';
import type { TaskCallbacks } from './ports/interpreter.js';

/** What an interpreter task waits for, by the name its token is kept under. */
export type Waiting = 'approval' | 'resume';

/** Resumes the interpreter task waiting on `waiting`, if one is; only one caller ever gets its token. */
export async function wake(
  deps: { readonly runs: Pick<RunStore, 'claimWaitToken'>; readonly callbacks: TaskCallbacks },
  runId: string,
  waiting: Waiting,
  output: Record<string, Json>,
): Promise<boolean> {
  const token = await deps.runs.claimWaitToken(runId, waiting);
  if (!token) return false;
  await deps.callbacks.succeed(token, output);
  return true;
}

/** Resumes whatever the run waits on (a gate or an operator), so it sees a cancel or rollback at once. */
export async function wakeAll(
  deps: { readonly runs: Pick<RunStore, 'claimWaitToken'>; readonly callbacks: TaskCallbacks },
  runId: string,
  output: Record<string, Json>,
): Promise<void> {
  await Promise.all([wake(deps, runId, 'approval', output), wake(deps, runId, 'resume', output)]);
}

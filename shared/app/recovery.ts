import type { RunStore } from './ports/runs.js';
import { StaleWriteError } from '../domain/errors.js';
import { writes } from './ports/writes.js';
import { findAction } from '../domain/catalogue.js';
import type { StepExecution } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import { type LostVerdict, lostExecutionVerdict } from '../domain/recovery.js';
import { runStateMachine } from '../domain/statuses.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import { draft } from './drafts.js';
import { claimAndResume } from './completion.js';

export interface RecoveryDeps {
  readonly runs: RunStore;
  readonly callbacks: TaskCallbacks;
}

/** The action a lost execution was running, as the runbook (or its command) names it. */
export interface LostAction {
  readonly backend: string;
  readonly action: string;
}

/**
 * Ends a step execution whose holder stopped renewing its lease, by `lostExecutionVerdict`:
 * with the receipt's recorded result, as expired (the planner may give a new attempt), or as
 * expired with the run paused for an operator. One transaction, guarded by the lease still being
 * lapsed, so the reconciler and a worker that finds the same execution never both end it. Then
 * resumes the interpreter if that completed the step.
 *
 * Input: the lost execution, the action it runs (undefined when unknown: not safe), `now`, and
 * how its worker died when the platform reported it.
 * Output: the verdict applied, or undefined when the execution was renewed or ended meanwhile.
 */
export function makeRecoverLost(deps: RecoveryDeps) {
  const { runs } = deps;

  return async function recoverLost(
    lost: StepExecution,
    body: LostAction | undefined,
    now: Date,
    died?: string,
  ): Promise<LostVerdict | undefined> {
    // What the lost holder staged before it died goes into the chain ahead of the execution's end.
    await runs.sequence(lost.runId);
    const receipt = await runs.receipt(lost.idempotencyKey);
    const verdict = lostExecutionVerdict({
      execution: lost,
      hasReceipt: receipt !== undefined,
      safeToRetry: body ? findAction(body.backend, body.action)?.safeToRetry : undefined,
      action: body ? `${body.backend}.${body.action}` : 'the action',
      ...(died !== undefined && { died }),
    });
    const nowIso = now.toISOString();
    const where = { stepId: lost.stepId, targetId: lost.targetId, meta: { workerId: lost.leaseOwner } };
    const succeeded = verdict.kind === 'receipt';
    const ended: StepExecution =
      verdict.kind === 'receipt'
        ? { ...lost, status: 'succeeded', endedAt: nowIso }
        : { ...lost, status: 'expired', endedAt: nowIso, error: verdict.error };
    const committed = await runs
      .mutate(lost.runId, (current) => {
        const pause =
          verdict.kind === 'pause' &&
          !runStateMachine.isTerminal(current.run.status) &&
          current.run.status !== 'paused';
        const ending: EventDraft =
          verdict.kind === 'receipt'
            ? draft(
                'step.succeeded',
                nowIso,
                { kind: lost.kind, attempt: lost.attempt, output: receipt?.output ?? {}, fromReceipt: true },
                where,
              )
            : draft(
                'step.failed',
                nowIso,
                { kind: lost.kind, attempt: lost.attempt, outcome: 'expired', error: verdict.error },
                where,
              );
        return {
          events: [
            ending,
            ...(pause ? [draft('run.paused', nowIso, { reason: verdict.error.message, stepId: lost.stepId })] : []),
          ],
          ...(pause && { run: { status: 'paused' as const, error: verdict.error, updatedAt: nowIso } }),
          writes: [
            writes.expireExecution(ended, now),
            writes.countResult(lost.runId, lost.kind, lost.stepId, lost.attempt, succeeded),
          ],
        };
      })
      .catch((err: unknown) => {
        // Renewed or ended since it was read: nothing is lost.
        if (err instanceof StaleWriteError) return undefined;
        throw err;
      });
    if (!committed) return undefined;
    await claimAndResume({ runs, callbacks: deps.callbacks }, lost);
    return verdict;
  };
}

export type RecoverLost = ReturnType<typeof makeRecoverLost>;

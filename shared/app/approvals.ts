import { z } from 'zod';
import type { ApprovalStore } from './ports/approvals.js';
import type { RunStore } from './ports/runs.js';
import { StaleWriteError } from '../domain/errors.js';
import { writes } from './ports/writes.js';
import { applyDecision, type DecisionBody, type DecisionResult, isOpen } from '../domain/approvals.js';
import type { Principal } from '../domain/entities.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import { stepState } from '../domain/step-state.js';
import { allSteps } from '../domain/runbook.js';
import { runStateMachine } from '../domain/statuses.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import type { Clock, RunbookStore } from './ports.js';
import { runbookOf, visibleRun } from './runs.js';
import { wake } from './waits.js';
import { draft } from './drafts.js';
import { cancelChange, rollbackChange } from './run-requests.js';

export interface ApprovalDeps {
  readonly runs: RunStore;
  readonly approvals: ApprovalStore;
  readonly callbacks: TaskCallbacks;
  readonly clock: Clock;
}

/**
 * Records one approver's decision (`POST /v1/runs/{id}/approvals/{approvalId}`).
 * Only an approver or admin of the run's tenant decides, never the run's requester. The decision,
 * its events and, when it resolves the gate, the run's new status commit together, guarded by the
 * gate's state: of two approvers completing the quorum at the same moment, one resolves it and the
 * other's decision is recorded against the resolved gate as a conflict. Whoever resolves it
 * resumes the waiting interpreter task, once.
 */
export function makeDecideApproval(deps: ApprovalDeps) {
  return async function decideApproval(
    principal: Principal,
    runId: string,
    approvalId: string,
    body: DecisionBody,
  ): Promise<DecisionResult> {
    const record = await visibleRun(deps.runs, principal, runId);
    for (let attempt = 0; attempt < 10; attempt++) {
      const approval = await deps.approvals.get(runId, approvalId);
      if (!approval) throw new NotFoundError(`approval '${approvalId}' not found on run '${runId}'`);
      const now = deps.clock.now();
      const result = applyDecision(approval, record.run, principal, body, now);
      if (!result.counted) return result;
      const at = now.toISOString();
      const about = { stepId: approval.stepId };
      const decided = result.approval.decisions.at(-1);
      const committed = await deps.runs
        .mutate(runId, (current) => {
          const waiting = current.run.status === 'waiting_for_approval';
          const events = [
            draft(
              'approval.decision_recorded',
              at,
              {
                approvalId,
                approver: principal.subject,
                decision: body.decision,
                ...(decided?.notes !== undefined && { notes: decided.notes }),
                approvals: result.approval.decisions.filter((d) => d.decision === 'approve').length,
                requiredApprovals: approval.requiredApprovals,
              },
              about,
            ),
          ];
          if (result.resolved)
            events.push(
              draft(
                'approval.resolved',
                at,
                {
                  approvalId,
                  status: result.resolved,
                  approvers: result.approval.decisions.map((d) => d.approver),
                  byPolicy: false,
                },
                about,
              ),
            );
          const reason = `approval ${approvalId} rejected by ${principal.subject}${body.notes ? `: ${body.notes}` : ''}`;
          const pause = result.resolved === 'rejected' && runStateMachine.can(current.run.status, 'paused');
          if (pause) events.push(draft('run.paused', at, { reason, stepId: approval.stepId, approvalId }, about));
          return {
            events,
            ...(result.resolved === 'approved' && waiting && { run: { status: 'running' as const, updatedAt: at } }),
            ...(pause && {
              run: {
                status: 'paused' as const,
                pausedReason: reason,
                error: { code: 'APPROVAL_REJECTED', message: reason, retryable: false },
                updatedAt: at,
              },
            }),
            writes: [writes.updateApproval(result.approval, approval)],
          };
        })
        .catch((error: unknown) => {
          // Another decision landed first: read the gate again and decide on that.
          if (error instanceof StaleWriteError) return undefined;
          throw error;
        });
      if (!committed) continue;
      if (result.resolved) await wake(deps, runId, 'approval', { approvalId, status: result.resolved });
      return result;
    }
    throw new ConflictError(`approval '${approvalId}' is being decided by many people at once; try again`);
  };
}

/**
 * The AwaitApproval task: keeps its token for the decision that resolves the gate. A gate resolved
 * (or a run cancelled or rolled back) before the token was kept resumes the task at once.
 */
export function makeAwaitApproval(deps: ApprovalDeps) {
  return async function awaitApproval(runId: string, approvalId: string, taskToken: string): Promise<void> {
    await deps.runs.putWaitToken(runId, 'approval', taskToken, deps.clock.now().toISOString());
    const [record, approval] = await Promise.all([deps.runs.load(runId), deps.approvals.get(runId, approvalId)]);
    const stillWaiting =
      record !== undefined &&
      approval !== undefined &&
      isOpen(approval.status) &&
      record.run.status === 'waiting_for_approval' &&
      !record.run.cancelRequested &&
      !record.rollbackRequested;
    if (!stillWaiting) await wake(deps, runId, 'approval', { approvalId, status: approval?.status ?? 'missing' });
  };
}

/** The Paused task: keeps its token for the operator's directive; a run resumed meanwhile goes on at once. */
export function makeAwaitResume(deps: ApprovalDeps) {
  return async function awaitResume(runId: string, taskToken: string): Promise<void> {
    await deps.runs.putWaitToken(runId, 'resume', taskToken, deps.clock.now().toISOString());
    const record = await deps.runs.load(runId);
    if (record?.run.status !== 'paused') await wake(deps, runId, 'resume', { status: record?.run.status ?? 'missing' });
  };
}

export const resumeBodySchema = z.strictObject({ directive: z.enum(['retry', 'rollback', 'cancel']) });
export type ResumeBody = z.infer<typeof resumeBodySchema>;

/**
 * An operator's directive for a paused run (`POST /v1/runs/{id}/resume`, seed 000 section 4.3):
 * `retry` asks a rejected gate again (or gives a step that failed for good one more attempt),
 * `rollback` undoes what succeeded, newest first, `cancel` ends the run.
 */
export function makeResumeRun(deps: ApprovalDeps & { runbooks: RunbookStore }) {
  return async function resumeRun(principal: Principal, runId: string, body: ResumeBody) {
    const record = await visibleRun(deps.runs, principal, runId);
    if (record.run.status !== 'paused')
      throw new ConflictError(
        `run '${runId}' is ${record.run.status}, not paused; only a paused run takes a directive`,
      );
    const runbook = await runbookOf(deps.runbooks, record.run);
    const executions = await deps.runs.executions(runId);
    const failed = allSteps(runbook)
      .map(({ step }) => ({ stepId: step.id, state: stepState(runId, step, 'step', executions) }))
      .flatMap(({ stepId, state }) => (state.kind === 'failed' ? [{ stepId, attempt: state.attempt }] : []))[0];
    const now = deps.clock.now().toISOString();
    const { directive } = body;
    const committed = await deps.runs.mutate(runId, (current) => {
      if (current.run.status !== 'paused') return undefined;
      const resumed = draft('run.resumed', now, { directive, by: principal.subject });
      const cleared = { error: undefined, pausedReason: undefined, updatedAt: now };
      switch (directive) {
        case 'retry':
          return {
            events: [resumed],
            run: {
              ...cleared,
              status: 'running' as const,
              ...(failed && { operatorRetry: failed }),
            },
          };
        case 'rollback': {
          const rollback = rollbackChange(current, principal.subject, now, 'directive');
          return { ...rollback, events: [resumed, ...rollback.events], run: { ...rollback.run, ...cleared } };
        }
        case 'cancel': {
          const cancel = cancelChange(principal.subject, now);
          return { ...cancel, events: [resumed, ...cancel.events] };
        }
      }
    });
    if (!committed) throw new ConflictError(`run '${runId}' was resumed by someone else`);
    await wake(deps, runId, 'resume', { directive });
    return { runId, status: committed.record.run.status, directive };
  };
}

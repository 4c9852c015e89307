import type { ApprovalStore } from './ports/approvals.js';
import type { RunStore } from './ports/runs.js';
import { StaleWriteError } from '../domain/errors.js';
import { writes } from './ports/writes.js';
import { dueTransition } from '../domain/approvals.js';
import type { Approval, Run } from '../domain/entities.js';
import { approvalStateMachine } from '../domain/statuses.js';
import type { ApprovalAlerts } from './ports.js';
import { draft } from './drafts.js';

/**
 * What time does to a gate (seed 000 section 4.3), applied by Plan and by the reconciler's sweep:
 * past its SLA an `approval.expired` event is appended, the escalation goes out and the run keeps
 * waiting; past its hard limit the gate expires and the step will fail. Guarded by the gate's
 * state, so a decision landing at the same moment wins or loses cleanly and nothing fires twice.
 * Resolves to what it applied, if anything.
 */
export function makeApplyDue(deps: {
  readonly runs: RunStore;
  readonly approvals: ApprovalStore;
  readonly alerts?: ApprovalAlerts;
}) {
  return async function applyDue(run: Run, approval: Approval, now: Date): Promise<'escalate' | 'expire' | undefined> {
    const due = dueTransition(approval, now);
    if (!due) return undefined;
    const at = now.toISOString();
    const next: Approval =
      due === 'escalate'
        ? { ...approval, status: 'escalated', escalatedAt: at }
        : { ...approval, status: 'expired', resolvedAt: at };
    approvalStateMachine.transition(approval.status, next.status);
    const about = { stepId: approval.stepId };
    const events =
      due === 'escalate'
        ? [
            draft(
              'approval.expired',
              at,
              {
                approvalId: approval.approvalId,
                slaDeadline: approval.slaDeadline,
                escalated: true,
                waitingUntil: approval.hardDeadline,
              },
              about,
            ),
          ]
        : [
            draft(
              'approval.expired',
              at,
              { approvalId: approval.approvalId, hardDeadline: approval.hardDeadline, final: true },
              about,
            ),
            draft('approval.resolved', at, { approvalId: approval.approvalId, status: 'expired' }, about),
          ];
    const committed = await deps.runs
      .mutate(run.runId, (current) => ({
        events,
        ...(due === 'expire' &&
          current.run.status === 'waiting_for_approval' && { run: { status: 'running' as const, updatedAt: at } }),
        writes: [writes.updateApproval(next, approval)],
      }))
      .catch((error: unknown) => {
        // Decided or moved on by someone else since it was read.
        if (error instanceof StaleWriteError) return undefined;
        throw error;
      });
    if (!committed) return undefined;
    if (due === 'escalate') await deps.alerts?.escalated(next, run);
    return due;
  };
}

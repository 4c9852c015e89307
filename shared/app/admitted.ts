import { writes, type WriteIntent } from './ports/writes.js';
import { autoApprove } from '../domain/approvals.js';
import type { Run } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import type { PlanDecision } from '../domain/planner.js';
import { draft } from './drafts.js';

/**
 * What records the policy's allowing a step's first attempt: `policy.decided`, and for a gate the
 * policy approved itself, the approved gate with its `approval.resolved`.
 */
export function admittedBy(
  run: Run,
  stepId: string,
  body: { readonly backend: string; readonly action: string },
  policy: Extract<PlanDecision, { action: 'dispatch' }>['policy'],
  now: Date,
): { events: EventDraft[]; writes: WriteIntent[] } {
  if (!policy) return { events: [], writes: [] };
  const at = now.toISOString();
  const events: EventDraft[] = [
    draft(
      'policy.decided',
      at,
      {
        outcome: 'allow',
        rule: policy.rule,
        reason: policy.reason,
        ...(policy.approvalId !== undefined && { approvalId: policy.approvalId }),
      },
      { stepId },
    ),
  ];
  const auto = policy.autoApproved;
  if (!auto) return { events, writes: [] };
  const approval = autoApprove(
    {
      gate: auto,
      round: auto.round,
      run,
      stepId,
      proposedAction: `${body.backend}.${body.action}`,
      rule: policy.rule,
      reason: policy.reason,
      now,
      slaSeconds: 0,
      hardLimitSeconds: 0,
    },
    auto,
  );
  events.push(
    draft(
      'approval.resolved',
      at,
      {
        approvalId: approval.approvalId,
        status: 'approved',
        byPolicy: true,
        confidence: auto.confidence,
        threshold: auto.threshold,
      },
      { stepId },
    ),
  );
  return { events, writes: [writes.putApproval(approval)] };
}

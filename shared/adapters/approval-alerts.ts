import type { ApprovalAlerts } from '../app/ports.js';
import type { Approval, Run } from '../domain/entities.js';
import { deliverAlert, type NotifyTargets } from './notify.js';

export interface ApprovalAlertOptions extends NotifyTargets {
  /** Where people open a run (the API or a console); the link is `<base>/v1/runs/<id>`. */
  readonly linkBase?: string;
  readonly log: (message: string, fields: Record<string, unknown>) => void;
}

/** The message posted to the webhook: the run, the step, the proposed action, the policy's reason and a link. */
export function alertText(kind: 'requested' | 'escalated', approval: Approval, run: Run, linkBase?: string): string {
  const link = `${linkBase?.replace(/\/$/, '') ?? ''}/v1/runs/${run.runId}`;
  const headline =
    kind === 'requested'
      ? `Approval needed (${approval.requiredApprovals} approver${approval.requiredApprovals > 1 ? 's' : ''})`
      : `ESCALATION: approval waiting past its SLA (${approval.slaDeadline})`;
  return [
    `*${headline}*`,
    `Run: <${link}|${run.runId}> (${run.runbookId} v${run.runbookVersion}, requested by ${run.requestedBy})`,
    `Step: ${approval.stepId} — proposed action ${approval.proposedAction}, blast radius ${approval.blastRadius}`,
    `Policy: ${approval.reason} [${approval.rule}]`,
    `Decide: POST ${link}/approvals/${approval.approvalId} {"decision": "approve" | "reject"}; hard limit ${approval.hardDeadline}`,
  ].join('\n');
}

/**
 * Approval requests and escalations out to EventBridge (detail-type `approval.requested` /
 * `approval.escalated`) and the notify webhook. Delivery problems are logged, never thrown: a
 * gate keeps waiting whether or not anyone was told, and the event log records it either way.
 */
export function makeApprovalAlerts(options: ApprovalAlertOptions): ApprovalAlerts {
  const send = async (kind: 'requested' | 'escalated', approval: Approval, run: Run) => {
    const detail = {
      runId: run.runId,
      tenantId: run.tenantId,
      runbookId: run.runbookId,
      approvalId: approval.approvalId,
      stepId: approval.stepId,
      proposedAction: approval.proposedAction,
      reason: approval.reason,
      requiredApprovals: approval.requiredApprovals,
      slaDeadline: approval.slaDeadline,
      hardDeadline: approval.hardDeadline,
    };
    const failures = await deliverAlert(options, {
      detailType: `approval.${kind}`,
      detail,
      text: alertText(kind, approval, run, options.linkBase),
    });
    for (const error of failures)
      options.log('approval alert not delivered', { kind, runId: run.runId, approvalId: approval.approvalId, error });
  };
  return {
    requested: (approval, run) => send('requested', approval, run),
    escalated: (approval, run) => send('escalated', approval, run),
  };
}

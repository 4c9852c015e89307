import { z } from 'zod';
import { storableTextSchema } from './storable.js';
import type { Approval, Principal, Run } from './entities.js';
import { ConflictError, ForbiddenError } from './errors.js';
import type { GateSpec } from './policy.js';
import { approvalStateMachine, type ApprovalStatus } from './statuses.js';

/** `POST /v1/runs/{id}/approvals/{approvalId}` (brief: "Contracts"). */
export const decisionBodySchema = z.strictObject({
  decision: z.enum(['approve', 'reject']),
  notes: storableTextSchema.max(2000).optional(),
});
export type DecisionBody = z.infer<typeof decisionBodySchema>;

/** Readable and stable: `step.restart.1`, `phase.main.1`, `run.final.2`. */
export const approvalIdFor = (gate: Pick<GateSpec, 'scope' | 'scopeId'>, round: number) =>
  `${gate.scope}.${gate.scopeId}.${round}`;

export const isOpen = (status: ApprovalStatus) => status === 'requested' || status === 'escalated';

/** The approvers whose approval counts: distinct people, never the policy twice. */
export const approvers = (approval: Pick<Approval, 'decisions'>) =>
  new Set(approval.decisions.filter((d) => d.decision === 'approve').map((d) => d.approver));

export interface GateRequest {
  readonly gate: GateSpec;
  readonly round: number;
  readonly run: Pick<Run, 'runId' | 'tenantId' | 'requestedBy'>;
  readonly stepId: string;
  readonly proposedAction: string;
  readonly rule: string;
  readonly reason: string;
  readonly now: Date;
  readonly slaSeconds: number;
  readonly hardLimitSeconds: number;
}

/** A new gate, waiting for people. */
export function requestApproval(request: GateRequest): Approval {
  const { gate, now } = request;
  return {
    approvalId: approvalIdFor(gate, request.round),
    runId: request.run.runId,
    tenantId: request.run.tenantId,
    scope: gate.scope,
    scopeId: gate.scopeId,
    round: request.round,
    stepId: request.stepId,
    proposedAction: request.proposedAction,
    status: 'requested',
    requiredApprovals: gate.requiredApprovals,
    decisions: [],
    rule: request.rule,
    reason: request.reason,
    blastRadius: gate.blastRadius,
    requestedBy: request.run.requestedBy,
    requestedAt: now.toISOString(),
    slaDeadline: new Date(now.getTime() + request.slaSeconds * 1000).toISOString(),
    hardDeadline: new Date(now.getTime() + request.hardLimitSeconds * 1000).toISOString(),
  };
}

/** A gate approved by policy (seed 000 section 4.2), with the numbers that allowed it. */
export function autoApprove(request: GateRequest, numbers: { confidence: number; threshold: number }): Approval {
  const at = request.now.toISOString();
  return {
    ...requestApproval(request),
    status: 'approved',
    resolvedAt: at,
    decisions: [
      {
        approver: 'policy',
        decision: 'approve',
        notes: `confidence ${numbers.confidence} >= threshold ${numbers.threshold}`,
        decidedAt: at,
        byPolicy: true,
      },
    ],
  };
}

export interface DecisionResult {
  readonly approval: Approval;
  /** False when this approver had already decided: the same person twice counts once. */
  readonly counted: boolean;
  /** Set when this decision resolved the gate. */
  readonly resolved?: 'approved' | 'rejected';
}

/**
 * One person's decision on a gate. The run's requester can never decide on it (the two-person
 * rule would mean nothing otherwise); a decided gate takes no more decisions; a second decision
 * from the same approver changes nothing; any rejection rejects; enough distinct approvals approve.
 */
export function applyDecision(
  approval: Approval,
  run: Pick<Run, 'requestedBy'>,
  principal: Pick<Principal, 'subject'>,
  body: DecisionBody,
  now: Date,
): DecisionResult {
  if (principal.subject === run.requestedBy)
    throw new ForbiddenError(
      `'${principal.subject}' requested this run and cannot decide on its approvals; another approver must`,
    );
  if (!isOpen(approval.status))
    throw new ConflictError(`approval '${approval.approvalId}' is already ${approval.status}`);
  if (approval.decisions.some((d) => d.approver === principal.subject)) return { approval, counted: false };
  const at = now.toISOString();
  const decisions = [
    ...approval.decisions,
    {
      approver: principal.subject,
      decision: body.decision,
      ...(body.notes !== undefined && { notes: body.notes }),
      decidedAt: at,
      byPolicy: false,
    },
  ];
  const next = { ...approval, decisions };
  const resolved =
    body.decision === 'reject'
      ? ('rejected' as const)
      : approvers(next).size >= approval.requiredApprovals
        ? ('approved' as const)
        : undefined;
  if (!resolved) return { approval: next, counted: true };
  approvalStateMachine.transition(approval.status, resolved);
  return { approval: { ...next, status: resolved, resolvedAt: at }, counted: true, resolved };
}

/**
 * What time does to an open gate: past its SLA it escalates (and keeps waiting); past its hard
 * limit it expires, and the step fails.
 */
export function dueTransition(approval: Approval, now: Date): 'escalate' | 'expire' | undefined {
  if (!isOpen(approval.status)) return undefined;
  if (now.getTime() >= Date.parse(approval.hardDeadline)) return 'expire';
  if (approval.status === 'requested' && now.getTime() >= Date.parse(approval.slaDeadline)) return 'escalate';
  return undefined;
}

import { writes, type WriteIntent } from './ports/writes.js';
import { autoApprove } from '../domain/approvals.js';
import type { ErrorInfo, Run } from '../domain/entities.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../domain/sandbox-profiles.js';
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

/** Why a step may not run at all: the policy denied it, or its sandbox profile does not allow an action of it. */
export interface Refusal {
  readonly rule: string;
  readonly reason: string;
  readonly viaPolicy: boolean;
  /** The action the sandbox profile refused, for `sandbox.violation`. */
  readonly action?: { readonly backend: string; readonly action: string };
}

/** The refusal of a step's first dispatch, if any: the policy's deny first, then the profile's check of each action. */
export function refusalOf(
  policy: Extract<PlanDecision, { action: 'dispatch' }>['policy'],
  bodies: ReadonlyArray<{ readonly backend: string; readonly action: string }>,
  profile: SandboxProfileName,
): Refusal | undefined {
  const forbidden = bodies.find((b) => !profileAllows(SANDBOX_PROFILES[profile], b.backend, b.action));
  if (policy?.outcome === 'deny') {
    // The policy enforces the profile too: its denial under that rule is a violation as well.
    const violated = policy.rule === 'sandbox-profile' ? (forbidden ?? bodies[0]) : undefined;
    return {
      rule: policy.rule,
      reason: policy.reason,
      viaPolicy: true,
      ...(violated && { action: { backend: violated.backend, action: violated.action } }),
    };
  }
  if (!forbidden) return undefined;
  return {
    rule: 'sandbox-profile',
    reason: `${forbidden.backend}.${forbidden.action} is not allowed by sandbox profile ${profile}`,
    viaPolicy: false,
    action: { backend: forbidden.backend, action: forbidden.action },
  };
}

/**
 * What records a refusal: `policy.decided` (denied by the policy), `sandbox.violation` (refused
 * by the profile) and `step.failed`, with the error the step fails with for good.
 */
export function refusedBy(
  refusal: Refusal,
  about: { readonly stepId: string; readonly kind: 'step' | 'rollback'; readonly attempt: number },
  profile: SandboxProfileName,
  now: string,
): { events: EventDraft[]; error: ErrorInfo } {
  const { rule, reason } = refusal;
  const { stepId, kind, attempt } = about;
  const code = refusal.action
    ? 'SANDBOX_VIOLATION'
    : rule === 'approval-expired'
      ? 'APPROVAL_EXPIRED'
      : 'POLICY_DENIED';
  const error = { code, message: reason, retryable: false };
  return {
    error,
    events: [
      ...(refusal.viaPolicy ? [draft('policy.decided', now, { outcome: 'deny', rule, reason }, { stepId })] : []),
      ...(refusal.action
        ? [
            draft(
              'sandbox.violation',
              now,
              { ...refusal.action, sandboxProfile: profile, enforcedBy: 'dispatcher', reason },
              { stepId, meta: { sandboxProfile: profile } },
            ),
          ]
        : []),
      draft('step.failed', now, { kind, attempt, outcome: 'failed', error }, { stepId }),
    ],
  };
}

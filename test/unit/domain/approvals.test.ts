import { describe, expect, it } from 'vitest';
import { applyDecision, dueTransition, requestApproval } from '../../../shared/domain/approvals.js';
import type { Approval } from '../../../shared/domain/entities.js';
import { plan, type PlanInput } from '../../../shared/domain/planner.js';
import { DEFAULT_POLICY } from '../../../shared/domain/policy.js';
import { parseRunbookObject } from '../../../shared/domain/runbook.js';

const now = new Date('2026-11-21T10:00:00Z');
const run = { runId: 'run-1', tenantId: 'acme', requestedBy: 'olive' };

function gate(requiredApprovals = 2): Approval {
  return requestApproval({
    gate: { scope: 'step', scopeId: 'rotate', requiredApprovals, blastRadius: 'high' },
    round: 1,
    run,
    stepId: 'rotate',
    proposedAction: 'test.echo',
    rule: 'two-key',
    reason: 'blast radius high: two people must approve it',
    now,
    slaSeconds: 600,
    hardLimitSeconds: 86_400,
  });
}

const approve = { decision: 'approve' as const };

describe('deciding on a gate', () => {
  it('refuses the run requester, whatever they decide', () => {
    expect(() => applyDecision(gate(), run, { subject: 'olive' }, approve, now)).toThrow(/requested this run/);
    expect(() => applyDecision(gate(), run, { subject: 'olive' }, { decision: 'reject' }, now)).toThrow(
      /cannot decide/,
    );
  });

  it('needs the quorum of distinct approvers; the same approver twice counts once', () => {
    const first = applyDecision(gate(), run, { subject: 'ana' }, approve, now);
    expect(first).toMatchObject({ counted: true, approval: { status: 'requested' } });
    expect(first.resolved).toBeUndefined();
    const again = applyDecision(first.approval, run, { subject: 'ana' }, approve, now);
    expect(again.counted).toBe(false);
    expect(again.approval.decisions).toHaveLength(1);
    const second = applyDecision(first.approval, run, { subject: 'ben' }, approve, now);
    expect(second).toMatchObject({ counted: true, resolved: 'approved', approval: { status: 'approved' } });
    expect(second.approval.resolvedAt).toBe(now.toISOString());
  });

  it('rejects on any rejection, and takes no decision once resolved', () => {
    const first = applyDecision(gate(), run, { subject: 'ana' }, approve, now);
    const rejected = applyDecision(first.approval, run, { subject: 'ben' }, { decision: 'reject', notes: 'no' }, now);
    expect(rejected).toMatchObject({ resolved: 'rejected', approval: { status: 'rejected' } });
    expect(() => applyDecision(rejected.approval, run, { subject: 'cy' }, approve, now)).toThrow(/already rejected/);
  });
});

describe('time on a gate', () => {
  it('escalates past the SLA and expires past the hard limit', () => {
    const g = gate();
    expect(dueTransition(g, new Date(now.getTime() + 599_000))).toBeUndefined();
    expect(dueTransition(g, new Date(now.getTime() + 600_000))).toBe('escalate');
    expect(dueTransition({ ...g, status: 'escalated' }, new Date(now.getTime() + 600_000))).toBeUndefined();
    expect(dueTransition({ ...g, status: 'escalated' }, new Date(now.getTime() + 86_400_000))).toBe('expire');
    expect(dueTransition({ ...g, status: 'approved' }, new Date(now.getTime() + 86_400_000))).toBeUndefined();
  });
});

describe('the planner with gates', () => {
  const runbook = parseRunbookObject({
    name: 'rotate',
    environment: 'staging',
    sandbox_profile: 'staging-standard',
    validation_mode: 'per_phase',
    phases: [
      {
        id: 'main',
        steps: [
          { id: 'a', backend: 'test', action: 'echo', params: { message: 'a' } },
          { id: 'b', backend: 'test', action: 'echo', params: { message: 'b' } },
        ],
      },
    ],
  });
  const decide = (approvals: PlanInput['approvals'], more: Partial<PlanInput> = {}) =>
    plan({
      runbook,
      run: { runId: 'run-1', status: 'running', cancelRequested: false, createdAt: now.toISOString() },
      executions: [],
      now,
      policy: DEFAULT_POLICY,
      approvals,
      ...more,
    });
  const phaseGate = (status: Approval['status'], round = 1) => ({
    ...gate(1),
    approvalId: `phase.main.${round}`,
    scope: 'phase' as const,
    scopeId: 'main',
    round,
    status,
  });

  it('asks for a new gate, waiting until its SLA', () => {
    expect(decide([])).toMatchObject({
      action: 'await_approval',
      approvalId: 'phase.main.1',
      round: 1,
      requiredApprovals: 1,
      timeoutSeconds: 1800,
    });
  });

  it('waits on an escalated gate until its hard limit', () => {
    const later = new Date(now.getTime() + 700_000);
    expect(decide([phaseGate('escalated')], { now: later })).toMatchObject({
      action: 'await_approval',
      approvalId: 'phase.main.1',
      timeoutSeconds: 86_400 - 700,
    });
  });

  it('dispatches once the gate is approved, and the phase gate covers its next step', () => {
    expect(decide([phaseGate('approved')])).toMatchObject({
      action: 'dispatch',
      stepId: 'a',
      policy: { outcome: 'allow', rule: 'approved', approvalId: 'phase.main.1' },
    });
    const executions = [
      { stepId: 'a', kind: 'step' as const, attempt: 1, status: 'succeeded' as const, targetId: 'once' },
    ];
    expect(decide([phaseGate('approved')], { executions })).toMatchObject({ action: 'dispatch', stepId: 'b' });
  });

  it('fails the step when its gate expired, and asks again after a rejection and a retry', () => {
    expect(decide([phaseGate('expired')])).toMatchObject({
      action: 'dispatch',
      policy: { outcome: 'deny', rule: 'approval-expired' },
    });
    expect(decide([phaseGate('rejected')])).toMatchObject({ action: 'await_approval', approvalId: 'phase.main.2' });
  });

  it('pauses a run whose gate was rejected until an operator directs it', () => {
    expect(
      decide([phaseGate('rejected')], {
        run: { runId: 'run-1', status: 'paused', cancelRequested: false, createdAt: now.toISOString() },
      }),
    ).toMatchObject({ action: 'pause' });
  });

  it('denies every step when the policy failed to load', () => {
    expect(decide([], { policy: new Error('bad policy') })).toMatchObject({
      action: 'dispatch',
      policy: { outcome: 'deny', rule: 'fail-closed' },
    });
  });

  it('gives an operator-retried step one more attempt', () => {
    const failed = {
      stepId: 'a',
      kind: 'step' as const,
      attempt: 1,
      status: 'expired' as const,
      targetId: 'once',
      endedAt: now.toISOString(),
      error: { code: 'LOST_NOT_SAFE_TO_RETRY', message: 'lost', retryable: false },
    };
    const run = { runId: 'run-1', status: 'running' as const, cancelRequested: false, createdAt: now.toISOString() };
    expect(decide([phaseGate('approved')], { executions: [failed], run })).toMatchObject({ action: 'fail' });
    expect(
      decide([phaseGate('approved')], {
        executions: [failed],
        run: { ...run, operatorRetry: { stepId: 'a', attempt: 1 } },
      }),
    ).toMatchObject({ action: 'dispatch', stepId: 'a', attempt: 2 });
  });
});

import { describe, expect, it } from 'vitest';
import { runErrorView, waitingForView } from '../../../shared/app/run-reasons.js';
import type { StepView } from '../../../shared/app/runs.js';
import type { Approval, Run } from '../../../shared/domain/entities.js';

const run = (more: Partial<Run>): Run => ({
  runId: 'run-1',
  tenantId: 't',
  runbookId: 'rb',
  runbookVersion: 1,
  runbookDigest: 'd',
  status: 'running',
  inputs: {},
  priority: 'normal',
  requestedBy: 'olive',
  createdAt: '2026-11-21T10:00:00.000Z',
  updatedAt: '2026-11-21T10:00:00.000Z',
  cancelRequested: false,
  ...more,
});

const approval = (more: Partial<Approval>): Approval => ({
  approvalId: 'step.deploy.1',
  runId: 'run-1',
  tenantId: 't',
  scope: 'step',
  scopeId: 'deploy',
  round: 1,
  stepId: 'deploy',
  proposedAction: 'script.run',
  status: 'requested',
  requiredApprovals: 2,
  decisions: [],
  rule: 'two-key',
  reason: 'high blast radius',
  blastRadius: 'high',
  requestedBy: 'olive',
  requestedAt: '2026-11-21T10:00:00.000Z',
  slaDeadline: '2026-11-21T10:10:00.000Z',
  hardDeadline: '2026-11-22T10:00:00.000Z',
  ...more,
});

const step = (id: string, status: StepView['status']): StepView => ({
  id,
  phase: 'main',
  backend: 'test',
  action: 'echo',
  status,
  attempts: 1,
  targets: [],
});

describe('the reasons a run detail gives', () => {
  it('names the failed step in the error of a failed run', () => {
    const failed = run({ status: 'failed', error: { code: 'STEP_FAILED', message: "step 'b' failed: boom" } });
    expect(runErrorView(failed, [step('a', 'succeeded'), step('b', 'failed')])).toEqual({
      code: 'STEP_FAILED',
      message: "step 'b' failed: boom",
      stepId: 'b',
    });
    expect(runErrorView(run({ status: 'running' }), [])).toBeUndefined();
  });

  it('shows the open gate a waiting run waits on, with its quorum and who decided', () => {
    const waiting = waitingForView(run({ status: 'waiting_for_approval' }), [
      approval({ approvalId: 'old', status: 'rejected', requestedAt: '2026-11-21T09:00:00.000Z' }),
      approval({
        decisions: [{ approver: 'adam', decision: 'approve', decidedAt: '2026-11-21T10:01:00.000Z', byPolicy: false }],
      }),
    ]);
    expect(waiting).toMatchObject({
      kind: 'approval',
      approvalId: 'step.deploy.1',
      requiredApprovals: 2,
      approvals: 1,
      decisions: [{ approver: 'adam', decision: 'approve' }],
      decide: expect.stringContaining('/v1/runs/run-1/approvals/step.deploy.1'),
    });
  });

  it('shows the reason and the rejected gate of a paused run, and the directives that resume it', () => {
    const paused = run({ status: 'paused', pausedReason: 'rejected: not during the freeze', currentStepId: 'deploy' });
    const rejected = approval({
      status: 'rejected',
      decisions: [{ approver: 'adam', decision: 'reject', decidedAt: '2026-11-21T10:01:00.000Z', byPolicy: false }],
    });
    expect(waitingForView(paused, [rejected])).toMatchObject({
      kind: 'operator',
      reason: 'rejected: not during the freeze',
      stepId: 'deploy',
      rejected: { approvalId: 'step.deploy.1', decisions: [{ approver: 'adam', decision: 'reject' }] },
      directives: ['retry', 'rollback', 'cancel'],
    });
  });

  it('shows when a throttled run is next eligible, and nothing for a run that is moving', () => {
    expect(waitingForView(run({ status: 'throttled', nextEligibleAt: '2026-11-21T11:00:00.000Z' }), [])).toEqual({
      kind: 'throttle',
      nextEligibleAt: '2026-11-21T11:00:00.000Z',
    });
    expect(waitingForView(run({ status: 'running' }), [])).toBeUndefined();
  });

  it('names the limit that holds a throttled run and the source it names', () => {
    const held = run({ status: 'throttled', heldBy: { limit: 'paused', source: 'hello' } });
    expect(waitingForView(held, [])).toEqual({ kind: 'throttle', limit: 'paused', source: 'hello' });
  });
});

describe('what a queued run waits for', () => {
  it('names the runs it depends on that have not succeeded yet', () => {
    const queued = run({ status: 'queued', dependsOn: ['run-a', 'run-b'] });
    const statuses = new Map([
      ['run-a', 'succeeded'],
      ['run-b', 'running'],
    ]);
    expect(waitingForView(queued, [], statuses)).toEqual({
      kind: 'dependencies',
      dependsOn: ['run-a', 'run-b'],
      pending: [{ runId: 'run-b', status: 'running' }],
    });
  });

  it('names the run of the same ticket it is queued behind', () => {
    const queued = run({ status: 'queued', ticket: { id: 'INC-1', source: 'jira' }, queuedBehind: 'run-a' });
    expect(waitingForView(queued, [])).toEqual({ kind: 'ticket', ticketId: 'INC-1', behind: 'run-a' });
  });

  it('names nothing once admission let the run go', () => {
    const admitted = run({
      status: 'queued',
      dependsOn: ['run-a'],
      admission: { at: '2026-11-21T10:00:00.000Z', held: [] },
    });
    expect(waitingForView(admitted, [])).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { makeDecideApproval } from '../../../shared/app/approvals.js';
import { ForbiddenError } from '../../../shared/domain/errors.js';
import {
  clock,
  runs,
  approvals,
  callbacks,
  olive,
  ann,
  bob,
  startRun,
  echo,
  interpreter,
} from './interpreter-world.js';

describe('approval decisions', () => {
  async function gated(): Promise<{ runId: string; approvalId: string }> {
    const runId = await startRun([echo('risky', { blast_radius: 'high' })]);
    await interpreter().planNext(runId);
    const [gate] = await approvals.list(runId);
    if (!gate) throw new Error('no gate');
    await runs.putWaitToken(runId, 'approval', 'approval-token', clock.now().toISOString());
    return { runId, approvalId: gate.approvalId };
  }

  it('resolves the gate at its quorum and resumes the waiting task once', async () => {
    const { runId, approvalId } = await gated();
    const decide = makeDecideApproval({ runs, approvals, callbacks, clock });
    expect(await decide(ann, runId, approvalId, { decision: 'approve' })).toMatchObject({ counted: true });
    expect(callbacks.succeeded).toEqual([]);
    expect(await decide(bob, runId, approvalId, { decision: 'approve' })).toMatchObject({ resolved: 'approved' });
    expect(callbacks.succeeded.map((c) => c.taskToken)).toEqual(['approval-token']);
    expect((await runs.load(runId))?.run.status).toBe('running');
  });

  it('refuses the run requester', async () => {
    const { runId, approvalId } = await gated();
    const decide = makeDecideApproval({ runs, approvals, callbacks, clock });
    await expect(decide(olive, runId, approvalId, { decision: 'approve' })).rejects.toBeInstanceOf(ForbiddenError);
  });

  it('counts the same approver once', async () => {
    const { runId, approvalId } = await gated();
    const decide = makeDecideApproval({ runs, approvals, callbacks, clock });
    await decide(ann, runId, approvalId, { decision: 'approve' });
    expect(await decide(ann, runId, approvalId, { decision: 'approve' })).toMatchObject({ counted: false });
    expect((await approvals.get(runId, approvalId))?.status).toBe('requested');
  });
});

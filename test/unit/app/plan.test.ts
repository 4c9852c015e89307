import { describe, expect, it } from 'vitest';
import { makeStepResults } from '../../../shared/app/step-results.js';
import { makePlanNext } from '../../../shared/app/plan.js';
import { makeCancelRun } from '../../../shared/app/runs.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import { DEFAULT_POLICY } from '../../../shared/domain/policy.js';
import {
  clock,
  runs,
  approvals,
  runbooks,
  queue,
  callbacks,
  requests,
  startRun,
  echo,
  interpreter,
  dispatchOf,
  types,
  startedWith,
  olive,
  succeedStep,
} from './interpreter-world.js';

describe('Plan', () => {
  it("decides to dispatch a queued run's first step and leaves its start to that dispatch: no write", async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    requests.clear();
    const decision = await interpreter().planNext(runId);
    expect(decision).toMatchObject({ action: 'dispatch', stepId: 'one', kind: 'step', attempt: 1 });
    expect((await runs.load(runId))?.run.status).toBe('queued');
    expect(await types(runId)).toEqual(['run.created']);
    expect(requests.get('transact') ?? 0).toBe(0);
  });

  it('starts a queued run itself when its first decision is not a dispatch', async () => {
    const runId = await startRun([echo('risky', { blast_radius: 'high' })]);
    await interpreter().planNext(runId);
    expect((await runs.load(runId))?.run).toMatchObject({
      status: 'waiting_for_approval',
      startedAt: clock.now().toISOString(),
    });
    expect((await types(runId)).slice(0, 2)).toEqual(['run.created', 'run.started']);
  });

  it('records nothing new when it decides the same state twice', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext } = interpreter();
    await planNext(runId);
    const before = await types(runId);
    expect(await planNext(runId)).toMatchObject({ action: 'dispatch', stepId: 'one' });
    expect(await types(runId)).toEqual(before);
  });

  it('looks up gates only for a runbook the policy can gate', async () => {
    const plain = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(plain, dispatchOf(await planNext(plain)), 'token-1');
    requests.clear();
    await interpreter().planNext(plain);
    expect(requests.get('query')).toBe(1);
    const risky = await startRun([echo('risky', { blast_radius: 'high' })]);
    await interpreter().planNext(risky);
    requests.clear();
    await interpreter().planNext(risky);
    expect(requests.get('query')).toBe(2);
  });

  it('reads no executions, gates or aggregates of a run that has not started: it has none', async () => {
    const runId = await startRun([echo('risky', { blast_radius: 'high' })]);
    requests.clear();
    expect(await interpreter().planNext(runId)).toMatchObject({ action: 'await_approval', stepId: 'risky' });
    // One read, of the run with its executions (none), and nothing else before the commit.
    expect(Object.fromEntries(requests)).toEqual({ query: 1, transact: 1 });
  });

  it('reads a started run and its executions in one request', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    requests.clear();
    expect(await planNext(runId)).toMatchObject({ action: 'dispatch', stepId: 'one' });
    expect(Object.fromEntries(requests)).toEqual({ query: 1 });
  });

  it('runs no step twice when another pass started the run and ran its first step while this one decided', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const { planNext, dispatch } = interpreter();
    // This pass reads the run while it is queued; meanwhile another pass starts it, and step one
    // runs and succeeds.
    let raced = false;
    const racing: RunStore = {
      ...runs,
      async snapshot(id) {
        const record = await runs.snapshot(id);
        if (!raced) {
          raced = true;
          await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
          const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
          await succeedStep(command);
        }
        return record;
      },
    };
    const late = makePlanNext({ runbooks, runs: racing, approvals, clock, callbacks, policy: DEFAULT_POLICY });
    // It decided on the queued run it read, which it does not write: its dispatch finds step one
    // done, sends nothing and resumes at once, and the next decision is step two.
    const stale = dispatchOf(await late(runId));
    expect(stale).toMatchObject({ stepId: 'one', attempt: 1 });
    await dispatch(runId, stale, 'token-2');
    expect(queue.sent).toHaveLength(1);
    expect(callbacks.succeeded.at(-1)).toEqual({
      taskToken: 'token-2',
      output: expect.objectContaining({ reattached: true }),
    });
    expect(await planNext(runId)).toMatchObject({ action: 'dispatch', stepId: 'two', attempt: 1 });
    expect((await types(runId)).filter((t) => t === 'run.started')).toHaveLength(1);
  });

  it('creates the gate a high blast radius step needs, asking for two approvers', async () => {
    const runId = await startRun([echo('risky', { blast_radius: 'high' })]);
    const decision = await interpreter().planNext(runId);
    expect(decision).toMatchObject({ action: 'await_approval', stepId: 'risky' });
    const [gate] = await approvals.list(runId);
    expect(gate).toMatchObject({ status: 'requested', requiredApprovals: 2, stepId: 'risky' });
    expect((await runs.load(runId))?.run.status).toBe('waiting_for_approval');
    expect(await types(runId)).toEqual(['run.created', 'run.started', 'policy.decided', 'approval.requested']);
  });

  it('fails the run when a step fails for good and nothing rolls back', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    const results = makeStepResults({ runs, callbacks, clock });
    await results.holdingLeases(runs).acquireLease(command.runId, command.executionId, 'w', clock.now(), 30_000);
    await results.finished(command, 'w', { outcome: 'failed', error: { code: 'BOOM', message: 'no' } });
    const decision = await planNext(runId);
    expect(decision).toMatchObject({ action: 'fail' });
    expect((await runs.load(runId))?.run.status).toBe('failed');
    expect((await types(runId)).at(-1)).toBe('run.failed');
  });
});

describe('the first Plan of a run its creation carried', () => {
  it('decides on the carried run without a read, and carries it on to Dispatch, which writes once', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const given = startedWith.get(runId);
    expect(given?.record.run).toMatchObject({ runId, status: 'queued' });
    const { plan, dispatch } = interpreter();
    requests.clear();
    const { decision, carried } = await plan(runId, undefined, given);
    expect(decision).toMatchObject({ action: 'dispatch', stepId: 'one', attempt: 1 });
    expect(Object.fromEntries(requests)).toEqual({});
    await dispatch(runId, dispatchOf(decision), 'token-1', carried && JSON.parse(JSON.stringify(carried)));
    expect(Object.fromEntries(requests)).toEqual({ transact: 1 });
    expect(await types(runId)).toEqual(['run.created', 'run.started', 'policy.decided', 'step.dispatched']);
  });

  it('sends nothing for a run cancelled since it was carried: Dispatch is refused, reads it, and resumes as cancelled', async () => {
    const runId = await startRun([echo('one')]);
    const given = startedWith.get(runId);
    await makeCancelRun({ runs, clock, callbacks })(olive, runId);
    const { plan, dispatch } = interpreter();
    const { decision, carried } = await plan(runId, undefined, given);
    // The carried run did not know of the cancel; Dispatch's write, chained on it, finds out.
    expect(decision).toMatchObject({ action: 'dispatch', stepId: 'one' });
    await dispatch(runId, dispatchOf(decision), 'token-1', carried && JSON.parse(JSON.stringify(carried)));
    expect(queue.sent).toEqual([]);
    expect(await runs.executions(runId)).toEqual([]);
    expect(callbacks.succeeded).toEqual([
      { taskToken: 'token-1', output: expect.objectContaining({ stepId: 'one', cancelled: true }) },
    ]);
    // The next Plan reads the run and ends it.
    expect(await interpreter().planNext(runId)).toMatchObject({ action: 'cancelled' });
  });

  it('writes nothing from a carried run whose gate another Plan opened since: it decides again on the run as it is', async () => {
    const runId = await startRun([echo('risky', { blast_radius: 'high' })]);
    const given = startedWith.get(runId);
    await interpreter().planNext(runId);
    const before = await types(runId);
    const { decision } = await interpreter().plan(runId, undefined, given);
    expect(decision).toMatchObject({ action: 'await_approval', stepId: 'risky' });
    expect(await types(runId)).toEqual(before);
    expect((await approvals.list(runId)).map((a) => a.status)).toEqual(['requested']);
  });

  it('sends no step twice when the run went on without it since it was carried: Dispatch re-attaches, the next Plan reads', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const given = startedWith.get(runId);
    // Another execution of the run started it and ran its first step meanwhile.
    const { planNext, plan, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    await succeedStep(command);
    const before = await types(runId);

    const { decision, carried } = await plan(runId, undefined, given);
    expect(decision).toMatchObject({ action: 'dispatch', stepId: 'one', attempt: 1 });
    await dispatch(runId, dispatchOf(decision), 'token-2', carried && JSON.parse(JSON.stringify(carried)));
    expect(queue.sent).toHaveLength(1);
    expect(await types(runId)).toEqual(before);
    expect(callbacks.succeeded.at(-1)).toEqual({
      taskToken: 'token-2',
      output: expect.objectContaining({ reattached: true }),
    });
    expect(await planNext(runId)).toMatchObject({ action: 'dispatch', stepId: 'two', attempt: 1 });
  });

  it("reads the run when what was carried is another run's", async () => {
    const runId = await startRun([echo('one')]);
    const other = await startRun([echo('one')]);
    requests.clear();
    const { decision } = await interpreter().plan(runId, undefined, startedWith.get(other));
    expect(decision).toMatchObject({ action: 'dispatch', stepId: 'one' });
    expect(Object.fromEntries(requests)).toEqual({ query: 1 });
  });
});

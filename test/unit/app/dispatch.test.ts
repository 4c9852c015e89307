import { describe, expect, it } from 'vitest';
import { makeDispatch } from '../../../shared/app/dispatch.js';
import type { CarriedRun, RunStore } from '../../../shared/app/ports/runs.js';
import { MAX_CARRIED_BYTES } from '../../../shared/app/carried.js';
import { makeCancelRun } from '../../../shared/app/runs.js';
import { policyDocumentSchema } from '../../../shared/domain/policy.js';
import {
  clock,
  runs,
  approvals,
  runbooks,
  queue,
  callbacks,
  inventory,
  olive,
  requests,
  startRun,
  echo,
  interpreter,
  dispatchOf,
  types,
  startRunbook,
} from './interpreter-world.js';

describe('Dispatch', () => {
  it('writes the executions and the aggregate with step.dispatched, then sends the command', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    expect(queue.sent.map((s) => s.command)).toEqual([
      expect.objectContaining({ runId, stepId: 'one', action: 'echo', params: { message: 'one' } }),
    ]);
    expect(await runs.executions(runId)).toEqual([expect.objectContaining({ stepId: 'one', status: 'pending' })]);
    expect(await runs.aggregate(runId, 'step', 'one', 1)).toMatchObject({ total: 1, done: 0, taskToken: 'token-1' });
    expect((await types(runId)).at(-1)).toBe('step.dispatched');
  });

  it("starts a queued run in its first step's dispatch: run.started first, in the same write", async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const { planNext, dispatch } = interpreter();
    const decision = dispatchOf(await planNext(runId));
    requests.clear();
    await dispatch(runId, decision, 'token-1');
    expect(requests.get('transact')).toBe(1);
    expect(await types(runId)).toEqual(['run.created', 'run.started', 'policy.decided', 'step.dispatched']);
    expect((await runs.load(runId))?.run).toMatchObject({
      status: 'running',
      currentStepId: 'one',
      startedAt: clock.now().toISOString(),
    });
    // The next dispatch finds the run started and starts nothing.
    await dispatch(runId, { ...decision, stepId: 'two' }, 'token-2');
    expect((await types(runId)).filter((t) => t === 'run.started')).toHaveLength(1);
  });

  it('re-attaches a second delivery of the same attempt: no second write, the new token, the command again', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    const decision = dispatchOf(await planNext(runId));
    await dispatch(runId, decision, 'token-1');
    const events = await types(runId);
    await dispatch(runId, decision, 'token-2');
    expect(await types(runId)).toEqual(events);
    expect(await runs.aggregate(runId, 'step', 'one', 1)).toMatchObject({ taskToken: 'token-2' });
    expect(queue.sent).toHaveLength(2);
  });

  it('refuses a step the policy denies: it fails for good, nothing is sent, and the task resumes', async () => {
    const runId = await startRun([echo('one')]);
    const policy = policyDocumentSchema.parse({ version: 1, deny: [{ id: 'no-echo', action: 'echo', reason: 'no' }] });
    const { planNext, dispatch } = interpreter(policy);
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    expect(queue.sent).toEqual([]);
    expect(await runs.executions(runId)).toEqual([expect.objectContaining({ status: 'failed' })]);
    expect(callbacks.succeeded).toEqual([{ taskToken: 'token-1', output: expect.objectContaining({ refused: true }) }]);
    expect(await types(runId)).toEqual(['run.created', 'run.started', 'policy.decided', 'step.failed']);
    expect((await runs.load(runId))?.run.status).toBe('running');
  });

  it('sends nothing for a run cancelled between its read and its write, and resumes the task as cancelled', async () => {
    const runId = await startRun([echo('one')]);
    const decision = dispatchOf(await interpreter().planNext(runId));
    // Dispatch reads the run before the cancel; the cancel commits before Dispatch writes.
    const cancel = makeCancelRun({ runs, clock, callbacks });
    const racing: RunStore = {
      ...runs,
      async load(id) {
        const record = await runs.load(id);
        await cancel(olive, runId);
        return record;
      },
    };
    const dispatch = makeDispatch({
      inventory,
      runbooks,
      runs: racing,
      approvals,
      clock,
      callbacks,
      queue,
    });
    await dispatch(runId, decision, 'token-1');
    expect(queue.sent).toEqual([]);
    expect(await runs.executions(runId)).toEqual([]);
    expect(await types(runId)).not.toContain('step.dispatched');
    expect(callbacks.succeeded).toEqual([
      { taskToken: 'token-1', output: expect.objectContaining({ stepId: 'one', cancelled: true }) },
    ]);
    // Plan then ends the run as cancelled.
    expect(await interpreter().planNext(runId)).toMatchObject({ action: 'cancelled' });
  });

  it('fails an execution whose command the queue refuses for good, and resumes the task once', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    const decision = dispatchOf(await planNext(runId));
    queue.refuse.add(`${runId}.step.one.1.once`);
    await dispatch(runId, decision, 'token-1');
    expect(await runs.executions(runId)).toEqual([
      expect.objectContaining({ status: 'failed', error: expect.objectContaining({ code: 'COMMAND_REJECTED' }) }),
    ]);
    expect(callbacks.succeeded.map((c) => c.taskToken)).toEqual(['token-1']);
  });
});

describe('Dispatch of the run Plan carried', () => {
  /** What the interpreter's state makes of a carried run: plain JSON. */
  const travelled = (carried: CarriedRun | undefined) => JSON.parse(JSON.stringify(carried)) as CarriedRun;

  it('writes from the carried run without reading it: one transaction, the same events', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const { plan, dispatch } = interpreter();
    const { decision, carried } = await plan(runId);
    expect(carried?.record.run.runId).toBe(runId);
    requests.clear();
    await dispatch(runId, dispatchOf(decision), 'token-1', travelled(carried));
    expect(Object.fromEntries(requests)).toEqual({ transact: 1 });
    expect(await types(runId)).toEqual(['run.created', 'run.started', 'policy.decided', 'step.dispatched']);
    expect(queue.sent.map((s) => s.command)).toEqual([expect.objectContaining({ runId, stepId: 'one' })]);
  });

  it('reads the run again when it changed since: a cancel in between sends nothing', async () => {
    const runId = await startRun([echo('one')]);
    const { plan, dispatch } = interpreter();
    const { decision, carried } = await plan(runId);
    await makeCancelRun({ runs, clock, callbacks })(olive, runId);
    await dispatch(runId, dispatchOf(decision), 'token-1', travelled(carried));
    expect(queue.sent).toEqual([]);
    expect(await runs.executions(runId)).toEqual([]);
    expect(await types(runId)).not.toContain('step.dispatched');
    expect(callbacks.succeeded).toEqual([
      { taskToken: 'token-1', output: expect.objectContaining({ stepId: 'one', cancelled: true }) },
    ]);
  });

  it('starts again from the run as it is when it changed in another way since', async () => {
    const runId = await startRun([echo('one')]);
    const { plan, dispatch } = interpreter();
    const { decision, carried } = await plan(runId);
    // A change that appends nothing: only the run's revision moves.
    await runs.mutate(runId, () => ({ run: { updatedAt: clock.now().toISOString() }, events: [] }));
    requests.clear();
    await dispatch(runId, dispatchOf(decision), 'token-1', travelled(carried));
    // Refused once, then read and written afresh.
    expect(requests.get('transact')).toBe(2);
    expect(requests.get('load')).toBeGreaterThanOrEqual(1);
    expect(await types(runId)).toEqual(['run.created', 'run.started', 'policy.decided', 'step.dispatched']);
    expect(queue.sent).toHaveLength(1);
  });

  it('refuses a step from the run as it is: a cancel in between writes no refusal', async () => {
    const runId = await startRun([echo('one')]);
    const { plan, dispatch } = interpreter(
      policyDocumentSchema.parse({ version: 1, deny: [{ id: 'no-echo', action: 'echo', reason: 'no' }] }),
    );
    const { decision, carried } = await plan(runId);
    await makeCancelRun({ runs, clock, callbacks })(olive, runId);
    await dispatch(runId, dispatchOf(decision), 'token-1', travelled(carried));
    expect(await types(runId)).not.toContain('step.failed');
    expect(await runs.executions(runId)).toEqual([]);
    expect(callbacks.succeeded).toEqual([
      { taskToken: 'token-1', output: expect.objectContaining({ stepId: 'one', cancelled: true }) },
    ]);
  });

  it('re-attaches when another delivery dispatched the step since Plan carried the run', async () => {
    const runId = await startRun([echo('one')]);
    const { plan, dispatch } = interpreter();
    const { decision, carried } = await plan(runId);
    await dispatch(runId, dispatchOf(decision), 'token-1', travelled(carried));
    const events = await types(runId);
    await dispatch(runId, dispatchOf(decision), 'token-2', travelled(carried));
    expect(await types(runId)).toEqual(events);
    expect(await runs.aggregate(runId, 'step', 'one', 1)).toMatchObject({ taskToken: 'token-2' });
    expect(queue.sent).toHaveLength(2);
  });

  it('ignores a carried run that is not the run dispatched', async () => {
    const runId = await startRun([echo('one')]);
    const other = await startRun([echo('one')]);
    const { plan, dispatch } = interpreter();
    const { decision } = await plan(runId);
    const { carried } = await plan(other);
    await dispatch(runId, dispatchOf(decision), 'token-1', travelled(carried));
    expect(queue.sent.map((s) => s.command.runId)).toEqual([runId]);
    expect((await runs.load(other))?.run.status).toBe('queued');
  });

  it('carries nothing but a dispatch, and nothing larger than the interpreter state should hold', async () => {
    const { plan } = interpreter(
      policyDocumentSchema.parse({
        version: 1,
        requireApproval: [{ id: 'gate', action: 'echo', reason: 'look first' }],
      }),
    );
    const gated = await startRun([echo('one')]);
    expect(await plan(gated)).toEqual({ decision: expect.objectContaining({ action: 'await_approval' }) });
    const large = await startRunbook({
      inputs: { notes: { type: 'string', default: 'n'.repeat(MAX_CARRIED_BYTES) } },
      steps: [echo('one')],
    });
    const planned = await interpreter().plan(large);
    expect(planned.decision.action).toBe('dispatch');
    expect(planned.carried).toBeUndefined();
    // A fan-out unit's Dispatch reads the run itself: a run with one carries nothing.
    const fanned = await startRunbook({
      name: 'fan',
      steps: [echo('one', { target: { group: 'web' } })],
    });
    expect(await interpreter().plan(fanned)).toEqual({ decision: expect.objectContaining({ action: 'dispatch' }) });
  });
});

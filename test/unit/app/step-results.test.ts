import { describe, expect, it } from 'vitest';
import { Later } from '../../../shared/app/later.js';
import { makeStepResults } from '../../../shared/app/step-results.js';
import type { Json } from '../../../shared/domain/canonical.js';
import { verifyChain } from '../../../shared/domain/events.js';
import {
  clock,
  runs,
  queue,
  callbacks,
  requests,
  startRun,
  echo,
  interpreter,
  dispatchOf,
  types,
} from './interpreter-world.js';

describe('step results', () => {
  /** A one-step run whose step a worker `w` has leased and started. */
  async function startedStep() {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    const results = makeStepResults({ runs, callbacks, clock });
    await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
    await results.started(command, 'w');
    return { runId, command, results };
  }

  it('records started, output and finished, and resumes the waiting task exactly once', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    const results = makeStepResults({ runs, callbacks, clock });
    const leases = results.holdingLeases(runs);
    expect(await leases.acquireLease(runId, command.executionId, 'w', clock.now(), 30_000)).toMatchObject({
      claim: 'lease',
    });
    expect(await leases.receipt(command.idempotencyKey)).toBeUndefined();
    await results.started(command, 'w');
    await results.output(command, 'w', [{ stream: 'stdout', text: 'hi', streamSeq: 1 }]);
    await results.finished(command, 'w', { outcome: 'succeeded', output: { said: 'hi' } });
    expect(await runs.execution(runId, command.executionId)).toMatchObject({
      status: 'succeeded',
      outputTail: ['hi'],
    });
    expect(await runs.receipt(command.idempotencyKey)).toMatchObject({ output: { said: 'hi' } });
    expect((await types(runId)).slice(-3)).toEqual(['step.started', 'step.output', 'step.succeeded']);
    expect(callbacks.succeeded).toEqual([{ taskToken: 'token-1', output: expect.objectContaining({ succeeded: 1 }) }]);
    // A duplicate delivery finds the execution ended and resumes nothing.
    expect(await leases.acquireLease(runId, command.executionId, 'w2', clock.now(), 30_000)).toEqual({
      claim: 'ended',
    });
    expect(await runs.claimCompletion(runId, 'step', 'one', 1)).toBeUndefined();
    expect(callbacks.succeeded).toHaveLength(1);
  });

  it("records a step's last few output lines in its result's own transaction, in order before the result", async () => {
    const { runId, command, results } = await startedStep();
    requests.clear();
    const last = ['one', 'two'].map((text, i) => ({ stream: 'stdout' as const, text, streamSeq: i + 1 }));
    await results.finished(command, 'w', { outcome: 'succeeded', output: {} }, last);
    expect(requests.get('transact')).toBe(1);
    const events = (await runs.events(runId, 0, 1000)).slice(-3);
    expect(events.map((e) => [e.type, e.payload.text])).toEqual([
      ['step.output', 'one'],
      ['step.output', 'two'],
      ['step.succeeded', undefined],
    ]);
    expect(await runs.execution(runId, command.executionId)).toMatchObject({ outputTail: ['one', 'two'] });
  });

  it('records many last output lines on their own first, then the result', async () => {
    const { runId, command, results } = await startedStep();
    requests.clear();
    const last = Array.from({ length: 60 }, (_, i) => ({ stream: 'stdout' as const, text: `l${i}`, streamSeq: i + 1 }));
    await results.finished(command, 'w', { outcome: 'failed', error: { code: 'BOOM', message: 'no' } }, last);
    expect(requests.get('transact')).toBe(2);
    const events = await runs.events(runId, 0, 1000);
    expect(events.filter((e) => e.type === 'step.output').map((e) => e.payload.text)).toEqual(last.map((l) => l.text));
    expect(events.at(-1)?.type).toBe('step.failed');
  });

  it("completes a one-execution step in its result's transaction and resumes with the token its command carries", async () => {
    const { runId, command, results } = await startedStep();
    expect(command.taskToken).toBe('token-1');
    requests.clear();
    await results.finished(command, 'w', { outcome: 'failed', error: { code: 'BOOM', message: 'no' } });
    expect(Object.fromEntries(requests)).toEqual({ transact: 1 });
    expect(await runs.aggregate(runId, 'step', 'one', 1)).toMatchObject({ done: 1, failed: 1, completed: true });
    expect(callbacks.succeeded).toEqual([
      { taskToken: 'token-1', output: { stepId: 'one', kind: 'step', attempt: 1, succeeded: 0, failed: 1 } },
    ]);
    // Completed: no one claims it again.
    expect(await runs.claimCompletion(runId, 'step', 'one', 1)).toBeUndefined();
  });

  it('chains the first record of a step on the head its command carries: a step costs four requests from its lease on', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    expect(command.chainHead).toEqual((await runs.load(runId))?.head);
    const results = makeStepResults({ runs, callbacks, clock });
    requests.clear();
    await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
    await results.started(command, 'w');
    await results.finished(command, 'w', { outcome: 'succeeded', output: {} });
    expect(Object.fromEntries(requests)).toEqual({ update: 1, transact: 2 });
    expect(verifyChain(await runs.events(runId, 0, 1000)).valid).toBe(true);
  });

  it('reads the head once when the one its command carries is stale', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    await runs.mutate(runId, (record) => ({
      events: [{ eventId: 'x', type: 'run.cancel_requested', timestamp: record.run.updatedAt, payload: {}, meta: {} }],
    }));
    const results = makeStepResults({ runs, callbacks, clock });
    await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
    requests.clear();
    await results.started(command, 'w');
    expect(Object.fromEntries(requests)).toEqual({ get: 1, transact: 2 });
    const events = await runs.events(runId, 0, 1000);
    expect(events.map((e) => e.type).slice(-2)).toEqual(['run.cancel_requested', 'step.started']);
    expect(verifyChain(events).valid).toBe(true);
  });

  it('returns once the result is committed when given somewhere to resume later, and the resume still goes out', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    let letResumeThrough: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (letResumeThrough = resolve));
    const slow = {
      ...callbacks,
      succeed: async (token: string, output: Record<string, Json>) => {
        await gate;
        return callbacks.succeed(token, output);
      },
    };
    const later = new Later(() => undefined);
    const results = makeStepResults({ runs, callbacks: slow, clock, later });
    await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
    await results.started(command, 'w');
    await results.finished(command, 'w', { outcome: 'succeeded', output: {} });
    expect(await runs.execution(runId, command.executionId)).toMatchObject({ status: 'succeeded' });
    expect(callbacks.succeeded).toEqual([]);
    expect(later.size).toBe(1);
    letResumeThrough();
    await later.settled();
    expect(callbacks.succeeded.map((c) => c.taskToken)).toEqual(['token-1']);
  });

  it('resumes a re-attached task at once when the step completed before its token was written', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    const decision = dispatchOf(await planNext(runId));
    await dispatch(runId, decision, 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    const results = makeStepResults({ runs, callbacks, clock });
    await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
    await results.started(command, 'w');
    callbacks.gone.add('token-1');
    await results.finished(command, 'w', { outcome: 'succeeded', output: {} });
    expect(callbacks.succeeded).toEqual([]);
    await dispatch(runId, decision, 'token-2');
    expect(callbacks.succeeded).toEqual([
      { taskToken: 'token-2', output: expect.objectContaining({ reattached: true }) },
    ]);
  });

  it("resumes with the aggregate's token when the command's is gone (the Dispatch re-attached since)", async () => {
    const { runId, command, results } = await startedStep();
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-2');
    callbacks.gone.add('token-1');
    await results.finished(command, 'w', { outcome: 'succeeded', output: {} });
    expect(callbacks.succeeded).toEqual([{ taskToken: 'token-2', output: expect.objectContaining({ succeeded: 1 }) }]);
  });

  it('lets a lapsed lease of a step that never started go to the next worker only after it lapses', async () => {
    const runId = await startRun([echo('one')]);
    const { planNext, dispatch } = interpreter();
    await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
    const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
    await runs.acquireLease(runId, command.executionId, 'a', clock.now(), 30_000);
    expect(await runs.acquireLease(runId, command.executionId, 'b', clock.now(), 30_000)).toEqual({ claim: 'held' });
    clock.advance(31_000);
    expect(await runs.acquireLease(runId, command.executionId, 'b', clock.now(), 30_000)).toMatchObject({
      claim: 'lease',
      execution: { leaseOwner: 'b' },
    });
  });
});

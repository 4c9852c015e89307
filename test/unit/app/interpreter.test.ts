import { makeInMemoryInventoryStore } from '../../../shared/app/ports/in-memory/inventory.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { verifyChain } from '../../../shared/domain/events.js';
import { Later } from '../../../shared/app/later.js';
import type { Json } from '../../../shared/domain/canonical.js';
import { makeDecideApproval } from '../../../shared/app/approvals.js';
import { makeDispatch } from '../../../shared/app/dispatch.js';
import { makePlanNext } from '../../../shared/app/plan.js';
import {
  type FakeClock,
  makeFakeClock,
  makeInMemoryRunbooks,
  makeRecordingCallbacks,
  makeRecordingQueue,
  type RecordingCallbacks,
  type RecordingQueue,
} from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import type { ApprovalStore } from '../../../shared/app/ports/approvals.js';
import type { RunbookStore } from '../../../shared/app/ports.js';
import { makeRegisterRunbook } from '../../../shared/app/runbooks.js';
import { createRunBodySchema, makeCancelRun, makeCreateRun } from '../../../shared/app/runs.js';
import { makeStepResults } from '../../../shared/app/step-results.js';
import type { Principal } from '../../../shared/domain/entities.js';
import { ForbiddenError } from '../../../shared/domain/errors.js';
import type { PlanDecision } from '../../../shared/domain/planner.js';
import { DEFAULT_POLICY, type PolicyDocument, policyDocumentSchema } from '../../../shared/domain/policy.js';

const olive: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator', 'approver'] };
const ann: Principal = { subject: 'ann', tenantId: 'acme', roles: ['approver'] };
const bob: Principal = { subject: 'bob', tenantId: 'acme', roles: ['approver'] };

let clock: FakeClock;
let runs: RunStore;
let approvals: ApprovalStore;
let runbooks: RunbookStore;
let queue: RecordingQueue;
let callbacks: RecordingCallbacks;
let requests: Map<string, number>;

beforeEach(() => {
  clock = makeFakeClock();
  ({ runs, approvals, requests } = makeInMemoryStores());
  runbooks = makeInMemoryRunbooks();
  queue = makeRecordingQueue();
  callbacks = makeRecordingCallbacks();
});

async function startRun(steps: ReadonlyArray<Record<string, unknown>>, environment = 'dev'): Promise<string> {
  await makeRegisterRunbook({ runbooks, clock })({
    principal: olive,
    format: 'json',
    source: JSON.stringify({ name: 'unit', environment, sandbox_profile: 'dev-flex', steps }),
  });
  const create = makeCreateRun({ runbooks, runs, clock, starter: { start: async (run) => `arn:${run.runId}` } });
  const { runId } = await create({ principal: olive, body: createRunBodySchema.parse({ runbookId: 'unit' }) });
  return runId;
}

const echo = (id: string, more: Record<string, unknown> = {}) => ({
  id,
  backend: 'test',
  action: 'echo',
  params: { message: id },
  ...more,
});

function interpreter(policy: PolicyDocument | Error = DEFAULT_POLICY) {
  const planNext = makePlanNext({ runbooks, runs, approvals, clock, callbacks, policy });
  const dispatch = makeDispatch({
    inventory: makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 }),
    runbooks,
    runs,
    approvals,
    clock,
    callbacks,
    queue,
  });
  return { planNext, dispatch };
}

function dispatchOf(decision: PlanDecision): Extract<PlanDecision, { action: 'dispatch' }> {
  if (decision.action !== 'dispatch') throw new Error(`expected a dispatch, got ${decision.action}`);
  return decision;
}

const types = async (runId: string) => (await runs.events(runId, 0, 1000)).map((e) => e.type);

describe('Plan', () => {
  it('starts a queued run and decides to dispatch its first step', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const decision = await interpreter().planNext(runId);
    expect(decision).toMatchObject({ action: 'dispatch', stepId: 'one', kind: 'step', attempt: 1 });
    expect((await runs.load(runId))?.run).toMatchObject({ status: 'running', currentStepId: 'one' });
    expect(await types(runId)).toEqual(['run.created', 'run.started']);
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
    await interpreter().planNext(plain);
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
    expect(requests.get('query') ?? 0).toBe(0);
  });

  it('decides on what another pass did meanwhile to a run it read before it started, never running a step twice', async () => {
    const runId = await startRun([echo('one'), echo('two')]);
    const { planNext, dispatch } = interpreter();
    // This pass reads the run while it is queued; meanwhile another pass starts it, and step one
    // runs and succeeds.
    let raced = false;
    const racing: RunStore = {
      ...runs,
      async load(id) {
        const record = await runs.load(id);
        if (!raced) {
          raced = true;
          await dispatch(runId, dispatchOf(await planNext(runId)), 'token-1');
          const [{ command }] = queue.sent as [(typeof queue.sent)[number]];
          const results = makeStepResults({ runs, callbacks, clock });
          await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
          await results.started(command, 'w');
          await results.finished(command, 'w', { outcome: 'succeeded', output: {} });
        }
        return record;
      },
    };
    const late = makePlanNext({ runbooks, runs: racing, approvals, clock, callbacks, policy: DEFAULT_POLICY });
    expect(await late(runId)).toMatchObject({ action: 'dispatch', stepId: 'two', attempt: 1 });
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
    expect(await types(runId)).toContain('step.failed');
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
      inventory: makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 }),
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

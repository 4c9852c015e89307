import { makeInMemoryInventoryStore } from '../../../shared/app/ports/in-memory/inventory.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { makeDispatch } from '../../../shared/app/dispatch.js';
import { makeFanout } from '../../../shared/app/fanout.js';
import { makeStepResults } from '../../../shared/app/step-results.js';
import { makePlanNext } from '../../../shared/app/plan.js';
import type { ApprovalStore } from '../../../shared/app/ports/approvals.js';
import {
  type FakeClock,
  makeFakeClock,
  makeInMemoryRunbooks,
  makeInMemoryWorkers,
  makeRecordingCallbacks,
  makeRecordingQueue,
  type RecordingCallbacks,
  type RecordingQueue,
} from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import type { RunbookStore, WorkerStore } from '../../../shared/app/ports.js';
import { type InterpreterControl, makeReconcile } from '../../../shared/app/reconciler.js';
import { makeRegisterRunbook } from '../../../shared/app/runbooks.js';
import { createRunBodySchema, makeCancelRun, makeCreateRun } from '../../../shared/app/runs.js';
import type { Principal, Worker } from '../../../shared/domain/entities.js';
import type { StepCommand } from '../../../shared/domain/messages.js';
import { makeAdmission } from '../../../shared/app/admission.js';
import { BACKLOG } from '../../../shared/app/ports/admission.js';
import { makeLimitControls } from '../../../shared/app/admission-controls.js';
import { makeInMemoryAdmissionStore } from '../../../shared/app/ports/in-memory/admission.js';
import { DEFAULT_POLICY } from '../../../shared/domain/policy.js';

const HEARTBEAT_MS = 5_000;
const olive: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };

let clock: FakeClock;
let runs: RunStore;
let approvals: ApprovalStore;
let runbooks: RunbookStore;
let workers: WorkerStore;
let queue: RecordingQueue;
let callbacks: RecordingCallbacks;
let statuses: Map<string, string>;
let restarted: string[];

beforeEach(() => {
  clock = makeFakeClock();
  ({ runs, approvals } = makeInMemoryStores());
  runbooks = makeInMemoryRunbooks();
  workers = makeInMemoryWorkers();
  queue = makeRecordingQueue();
  callbacks = makeRecordingCallbacks();
  statuses = new Map();
  restarted = [];
});

const interpreter: InterpreterControl = {
  executionArnOf: (runId) => `arn:execution:${runId}`,
  status: async (arn) => statuses.get(arn) ?? 'RUNNING',
  restart: async (run, at) => {
    restarted.push(run.runId);
    return `arn:execution:${run.runId}-r${at.getTime()}`;
  },
};

/** A reconciler over the test's stores; the scheduled function keeps one for its sweeps. */
const reconciler = (more: Partial<Parameters<typeof makeReconcile>[0]> = {}) =>
  makeReconcile({
    runs,
    runbooks,
    workers,
    callbacks,
    queue,
    approvals,
    interpreter,
    clock,
    heartbeatMs: HEARTBEAT_MS,
    log: () => undefined,
    ...more,
  });

/** One sweep of a fresh reconciler. */
const reconcile = (more: Partial<Parameters<typeof makeReconcile>[0]> = {}) => reconciler(more)();

const ONE_STEP = [{ id: 'one', backend: 'test', action: 'echo', params: { message: 'hi' }, retries: 1 }];

/** A run whose only step was dispatched with `token-1`; resolves its first command. */
async function dispatched(
  steps: readonly object[] = ONE_STEP,
  inventory = makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 }),
): Promise<StepCommand> {
  await makeRegisterRunbook({ runbooks, clock })({
    principal: olive,
    format: 'json',
    source: JSON.stringify({ name: 'unit', environment: 'dev', sandbox_profile: 'dev-flex', steps }),
  });
  const create = makeCreateRun({ runbooks, runs, clock, starter: { start: async (run) => `arn:${run.runId}` } });
  const { runId } = await create({ principal: olive, body: createRunBodySchema.parse({ runbookId: 'unit' }) });
  const decision = await makePlanNext({ runbooks, runs, approvals, clock, callbacks, policy: DEFAULT_POLICY })(runId);
  if (decision.action !== 'dispatch') throw new Error('expected a dispatch');
  await makeDispatch({
    inventory,
    runbooks,
    runs,
    approvals,
    clock,
    callbacks,
    queue,
  })(runId, decision, 'token-1');
  const sent = queue.sent[0];
  if (!sent) throw new Error('nothing was sent');
  return sent.command;
}

function worker(workerId: string, more: Partial<Worker> = {}): Worker {
  const at = clock.now().toISOString();
  return {
    workerId,
    hostname: 'h',
    pid: 1,
    sandboxProfile: 'dev-flex',
    environment: 'dev',
    backends: {},
    groups: [],
    version: 'test',
    status: 'idle',
    registeredAt: at,
    lastHeartbeatAt: at,
    stats: { cpuPercent: 0, rssBytes: 0, tasksCompleted: 0 },
    ...more,
  };
}

describe('the reconciler', () => {
  it('declares a worker dead after three missed heartbeats, and only that one', async () => {
    await workers.register(worker('silent'));
    clock.advance(3 * HEARTBEAT_MS + 1);
    await workers.register(worker('beating'));
    const summary = await reconcile();
    expect(summary.deadWorkers).toBe(1);
    const status = new Map((await workers.list()).map((w) => [w.workerId, w.status]));
    expect(status).toEqual(
      new Map([
        ['silent', 'dead'],
        ['beating', 'idle'],
      ]),
    );
  });

  it('ends an execution whose lease lapsed before it started, and resumes the waiting task once', async () => {
    const cmd = await dispatched();
    await runs.acquireLease(cmd.runId, cmd.executionId, 'gone', clock.now(), 10_000);
    clock.advance(11_000);
    const summary = await reconcile();
    expect(summary).toMatchObject({ leasesExpired: 1, recovered: 1 });
    expect(await runs.execution(cmd.runId, cmd.executionId)).toMatchObject({
      status: 'expired',
      error: { code: 'LEASE_EXPIRED' },
    });
    expect(callbacks.succeeded.map((c) => c.taskToken)).toEqual(['token-1']);
    expect(await reconcile()).toMatchObject({ leasesExpired: 0 });
    expect(callbacks.succeeded).toHaveLength(1);
  });

  it('leaves a lease that is being renewed alone', async () => {
    const cmd = await dispatched();
    await runs.acquireLease(cmd.runId, cmd.executionId, 'alive', clock.now(), 10_000);
    clock.advance(9_000);
    await runs.renewLease(cmd.runId, cmd.executionId, 'alive', new Date(clock.now().getTime() + 10_000));
    clock.advance(9_000);
    expect(await reconcile()).toMatchObject({ leasesExpired: 0 });
    expect(await runs.execution(cmd.runId, cmd.executionId)).toMatchObject({ status: 'leased', leaseOwner: 'alive' });
  });

  it('sets a worker idle that shows busy with an execution it does not hold', async () => {
    const cmd = await dispatched();
    await workers.register(worker('confused', { status: 'busy', currentExecutionId: cmd.executionId }));
    const summary = await reconcile();
    expect(summary.statesFixed).toBeGreaterThanOrEqual(1);
    expect((await workers.list())[0]).toMatchObject({ workerId: 'confused', status: 'idle' });
  });

  it('restarts the interpreter of a quiet run whose execution ended, deriving its first execution', async () => {
    const cmd = await dispatched();
    statuses.set(`arn:execution:${cmd.runId}`, 'FAILED');
    clock.advance(61_000);
    expect((await reconcile()).statesFixed).toBeGreaterThanOrEqual(1);
    expect(restarted).toEqual([cmd.runId]);
    expect((await runs.load(cmd.runId))?.executionArn).toMatch(new RegExp(`${cmd.runId}-r\\d+$`));
    clock.advance(61_000);
    await reconcile();
    expect(restarted).toEqual([cmd.runId]);
  });

  it('counts a running run as stuck only once its log is silent for longer than its longest step timeout', async () => {
    await dispatched();
    clock.advance(4 * 60_000);
    expect((await reconcile()).stuckRuns).toBe(0);
    clock.advance(2 * 60_000);
    expect((await reconcile()).stuckRuns).toBe(1);
  });

  it('releases the waiting targets of a fan-out whose last worker died between counting its result and releasing', async () => {
    const inventory = makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 });
    for (const id of ['web-1', 'web-2', 'web-3'])
      await inventory.declare({ id, tenantId: 'acme', groups: ['web'], attributes: {} }, clock.now());
    const step = { id: 'roll', backend: 'test', action: 'echo', params: { message: 'hi' }, target: { group: 'web' } };
    await dispatched([{ ...step, max_concurrency: 2 }], inventory);
    expect(queue.sent.map((s) => s.command.targetId)).toEqual(['web-1', 'web-2']);
    // Each result is counted, then the worker dies before it releases the next target.
    const fanout = makeFanout({ runs, runbooks, queue, callbacks, clock });
    const dying = makeStepResults({
      runs,
      callbacks,
      clock,
      fanout: {
        ...fanout,
        release: async () => {
          throw new Error('the worker died');
        },
      },
    });
    for (const { command } of [...queue.sent]) {
      await dying.holdingLeases(runs).acquireLease(command.runId, command.executionId, 'w', clock.now(), 30_000);
      await expect(dying.finished(command, 'w', { outcome: 'succeeded' })).rejects.toThrow('the worker died');
    }
    expect(queue.sent).toHaveLength(2);

    clock.advance(61_000);
    expect(await reconcile()).toMatchObject({ releasesRepaired: 1 });
    expect(queue.sent.map((s) => s.command.targetId)).toEqual(['web-1', 'web-2', 'web-3']);
    clock.advance(61_000);
    expect(await reconcile()).toMatchObject({ releasesRepaired: 0 });
    expect(queue.sent).toHaveLength(3);
  });

  it('sends again the command of a pending execution whose send a crash lost, once the run is quiet for two minutes', async () => {
    const cmd = await dispatched();
    queue.sent.length = 0;
    clock.advance(61_000);
    expect(await reconcile()).toMatchObject({ commandsResent: 0 });
    expect(queue.sent).toEqual([]);

    clock.advance(60_000);
    expect(await reconcile()).toMatchObject({ commandsResent: 1 });
    expect(queue.sent).toEqual([{ profile: 'dev-flex', command: cmd }]);
  });

  it('does not send again a command a worker has leased', async () => {
    const cmd = await dispatched();
    queue.sent.length = 0;
    await runs.acquireLease(cmd.runId, cmd.executionId, 'alive', clock.now(), 600_000);
    clock.advance(121_000);
    expect(await reconcile()).toMatchObject({ commandsResent: 0 });
    expect(queue.sent).toEqual([]);
  });
});

describe('runs that admission holds', () => {
  /** A runbook, and runs created through admission, whose interpreter starts only when admitted. */
  async function admitted() {
    const stores = makeInMemoryStores();
    ({ runs, approvals } = stores);
    const admissionStore = makeInMemoryAdmissionStore(stores.cells);
    const starter = {
      start: async (run: { runId: string }) => {
        statuses.set(`arn:execution:${run.runId}`, 'RUNNING');
        return `arn:execution:${run.runId}`;
      },
    };
    const admission = makeAdmission({ runs, admission: admissionStore, starter, clock });
    await makeRegisterRunbook({ runbooks, clock })({
      principal: olive,
      format: 'json',
      source: JSON.stringify({ name: 'unit', environment: 'dev', sandbox_profile: 'dev-flex', steps: ONE_STEP }),
    });
    const createRun = makeCreateRun({ runbooks, runs, clock, starter, admission });
    const create = async (body: object = {}) =>
      createRun({ principal: olive, body: createRunBodySchema.parse({ runbookId: 'unit', ...body }) });
    const limits = makeLimitControls({ admission: admissionStore, clock });
    const cancel = makeCancelRun({ runs, clock, callbacks });
    return { admission, admissionStore, create, limits, cancel };
  }

  /** A run throttled by a pause, quiet for five minutes, with no execution: one the reconciler would take for lost. */
  async function quietThrottledRun() {
    const { admission, create, limits } = await admitted();
    await limits.pause(olive, { source: 'unit', reason: 'hold' });
    const { runId, status } = await create();
    expect(status).toBe('throttled');
    statuses.set(`arn:execution:${runId}`, 'MISSING');
    clock.advance(5 * 60_000);
    return { admission, runId };
  }

  it('never starts the interpreter of a throttled run, however long it waits', async () => {
    const { admission, runId } = await quietThrottledRun();
    await reconcile({ settleWaiting: admission.settleDependencies });
    expect(restarted).toEqual([]);
    expect(statuses.get(`arn:execution:${runId}`)).toBe('MISSING');
    expect((await runs.load(runId))?.run).toMatchObject({
      status: 'throttled',
      heldBy: { limit: 'paused', source: 'unit' },
    });
  });

  it('never starts the interpreter of a run that admission held after the sweep listed it', async () => {
    const { admission, runId } = await quietThrottledRun();
    // The sweep's listing still shows the run fresh: it was throttled after the list was read.
    const listedEarlier: typeof runs = {
      ...runs,
      activeRuns: async (...args) =>
        (await runs.activeRuns(...args)).map((r) => ({ ...r, run: { ...r.run, status: 'queued' as const } })),
    };
    await reconcile({ runs: listedEarlier, settleWaiting: admission.settleDependencies });
    expect(restarted).toEqual([]);
    expect((await runs.load(runId))?.run.status).toBe('throttled');
  });

  it('never starts the interpreter of a run whose dependency is still running', async () => {
    const { admission, create } = await admitted();
    const first = await create();
    const second = await create({ dependsOn: [first.runId] });
    expect(second.status).toBe('queued');
    statuses.set(`arn:execution:${second.runId}`, 'MISSING');
    clock.advance(5 * 60_000);
    await reconcile({ settleWaiting: admission.settleDependencies });
    expect(restarted).toEqual([]);
    expect(statuses.get(`arn:execution:${second.runId}`)).toBe('MISSING');
  });

  it('admits a waiting run whose dependency ended while the word of it was lost', async () => {
    const { admission, create } = await admitted();
    const first = await create();
    const second = await create({ dependsOn: [first.runId] });
    statuses.set(`arn:execution:${second.runId}`, 'MISSING');
    const now = clock.now().toISOString();
    // The run ends, and the admitter never hears of it.
    await runs.mutate(first.runId, () => ({
      run: { status: 'succeeded', endedAt: now, updatedAt: now },
      events: [{ eventId: 'end', type: 'run.succeeded', timestamp: now, payload: {}, meta: {} }],
    }));
    clock.advance(61_000);
    await reconcile({ settleWaiting: admission.settleDependencies });
    expect(statuses.get(`arn:execution:${second.runId}`)).toBe('RUNNING');
    expect(restarted).toEqual([]);
  });

  it('notes the tenant of a quiet throttled run again, so a lost note cannot hold it for good', async () => {
    const { admission, admissionStore, create, limits } = await admitted();
    await limits.pause(olive, { source: 'unit', reason: 'hold' });
    const { runId } = await create();
    // The note is lost (a crash after the backlog place was written): no pass visits the tenant.
    for (const { tenantId, mark } of await admissionStore.backlogTenants())
      await admissionStore.clearBacklog(tenantId, mark);
    await limits.resume(olive, { source: 'unit', reason: 'done' });
    expect(await admission.admitBacklog()).toBe(0);
    clock.advance(61_000);
    await reconcile({ settleWaiting: admission.settleDependencies, noteBacklog: admission.noteBacklog });
    expect(restarted).toEqual([]);
    expect(await admission.admitBacklog()).toBe(1);
    expect(statuses.get(`arn:execution:${runId}`)).toBe('RUNNING');
  });

  it('ends a throttled run at once when it is cancelled, and gives back its backlog place', async () => {
    const { admissionStore, create, limits, cancel } = await admitted();
    await limits.pause(olive, { source: 'unit', reason: 'hold' });
    const { runId } = await create();
    expect(await admissionStore.cells('acme', BACKLOG)).toHaveLength(1);

    expect(await cancel(olive, runId)).toMatchObject({ status: 'cancelled' });
    const types = (await runs.events(runId, 0, 100)).map((e) => e.type);
    expect(types.slice(-2)).toEqual(['run.cancel_requested', 'run.cancelled']);
    expect(await admissionStore.cells('acme', BACKLOG)).toEqual([]);
    // Resumed, the source admits nothing: the run stays cancelled and never starts.
    await limits.resume(olive, { source: 'unit', reason: 'done' });
    expect(statuses.has(`arn:execution:${runId}`)).toBe(false);
  });

  it('ends a run waiting on a dependency at once when it is cancelled', async () => {
    const { admission, create, cancel } = await admitted();
    const first = await create();
    const second = await create({ dependsOn: [first.runId] });
    expect(await cancel(olive, second.runId)).toMatchObject({ status: 'cancelled' });
    const now = clock.now().toISOString();
    await runs.mutate(first.runId, () => ({
      run: { status: 'succeeded', endedAt: now, updatedAt: now },
      events: [{ eventId: 'end', type: 'run.succeeded', timestamp: now, payload: {}, meta: {} }],
    }));
    await admission.onRunEnded(first.runId, 'acme');
    expect(statuses.has(`arn:execution:${second.runId}`)).toBe(false);
    expect((await runs.load(second.runId))?.run.status).toBe('cancelled');
  });

  it('goes on after the last run a full sweep looked at, so held runs cannot hide a run that needs repair', async () => {
    const { create, limits } = await admitted();
    await limits.pause(olive, { source: 'unit', reason: 'hold' });
    for (let i = 0; i < 100; i++) await create();
    await limits.resume(olive, { source: 'unit', reason: 'done' });
    clock.advance(1_000);
    const stalled = await create();
    statuses.set(`arn:execution:${stalled.runId}`, 'FAILED');
    clock.advance(61_000);
    // One reconciler sweeping twice, as the scheduled function does.
    const sweep = reconciler();
    await sweep();
    expect(restarted).toEqual([]);
    await sweep();
    expect(restarted).toEqual([stalled.runId]);
  });

  it('checks the other quiet runs when admission cannot settle one', async () => {
    const { create } = await admitted();
    const first = await create();
    await create({ dependsOn: [first.runId] });
    statuses.set(`arn:execution:${first.runId}`, 'FAILED');
    clock.advance(61_000);
    const logged: string[] = [];
    await reconcile({
      settleWaiting: () => Promise.reject(new Error('conflict')),
      log: (message) => logged.push(message),
    });
    expect(logged).toContain('quiet run not checked');
    expect(restarted).toEqual([first.runId]);
  });
});

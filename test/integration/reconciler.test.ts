import { makeInMemoryInventoryStore } from '../../shared/app/ports/in-memory/inventory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Json } from '../../shared/domain/canonical.js';
import type { Principal } from '../../shared/domain/entities.js';
import type { RunStore } from '../../shared/adapters/dynamodb/run-store.js';
import type { InterpreterControl, Reconcile } from '../../shared/app/reconciler.js';
import type { RunbookStore, WorkerStore } from '../../shared/app/ports.js';
import type { ApprovalStore } from '../../shared/adapters/dynamodb/approval-store.js';
import { writes } from '../../shared/app/ports/writes.js';
import type { StepCommand } from '../../shared/domain/messages.js';
import type { makeStepResults as MakeStepResults } from '../../shared/app/step-results.js';
import type { PlanDecision } from '../../shared/domain/planner.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

/**
 * The reconciler against DynamoDB Local, with the interpreter and its task callbacks faked: each
 * test leaves the state a crash would (a lapsed lease, an ended interpreter execution, a busy
 * worker with no lease, a counted but unclaimed aggregate) and checks the repair.
 */
const operator: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };
const LEASE_MS = 10_000;
const HEARTBEAT_MS = 5_000;

let dynamo: TestDynamo;
let runs: RunStore;
let runbooks: RunbookStore;
let workers: WorkerStore;
let now = new Date('2026-11-21T10:00:00.000Z');
const clock = { now: () => now };
const resumed: Array<{ token: string; output: Record<string, Json> }> = [];
const restarted: string[] = [];
const interpreterStatus = new Map<string, string>();
let reconcile: Reconcile;
let approvals: ApprovalStore;
let planNext: (runId: string) => Promise<PlanDecision>;
let createRun: (runbookId: string) => Promise<string>;
let dispatch: (runId: string, stepId: string, attempt?: number) => Promise<string>;
let stepResults: typeof MakeStepResults;
const sent: StepCommand[] = [];

const interpreter: InterpreterControl = {
  status: async (arn) => interpreterStatus.get(arn) ?? 'RUNNING',
  executionArnOf: (runId) => `arn:local:execution:${runId}`,
  restart: async (run, at) => {
    restarted.push(run.runId);
    return `arn:local:execution:${run.runId}-r${at.getTime()}`;
  },
};

beforeAll(async () => {
  dynamo = await startTestDynamo('reconciler');
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeRunStore } = await import('../../shared/adapters/dynamodb/run-store.js');
  const { makeDynamoRunbookStore } = await import('../../shared/adapters/dynamodb/runbook-store.js');
  const { makeWorkerStore } = await import('../../shared/adapters/dynamodb/worker-store.js');
  const { makeApprovalStore } = await import('../../shared/adapters/dynamodb/approval-store.js');
  const { makeRegisterRunbook } = await import('../../shared/app/runbooks.js');
  const { createRunBodySchema, makeCreateRun } = await import('../../shared/app/runs.js');
  const { makeDispatch, makePlanNext } = await import('../../shared/app/interpreter.js');
  const { DEFAULT_POLICY } = await import('../../shared/domain/policy.js');
  const { makeReconcile } = await import('../../shared/app/reconciler.js');
  ({ makeStepResults: stepResults } = await import('../../shared/app/step-results.js'));
  runs = makeRunStore(documentClient, dynamo.tableNames);
  runbooks = makeDynamoRunbookStore(documentClient, dynamo.tableNames.state);
  workers = makeWorkerStore(documentClient, dynamo.tableNames.state);
  const callbacks = {
    succeed: async (token: string, output: Record<string, Json>) => resumed.push({ token, output }) > 0,
    fail: async () => undefined,
  };
  const register = makeRegisterRunbook({ runbooks, clock });
  for (const [name, action, params, more] of [
    ['lost-counter', 'counter', { key: 'reconciler' }, {}],
    ['lost-sleep', 'sleep', { ms: 1000 }, {}],
    ['gated-sleep', 'sleep', { ms: 1000 }, { validation_mode: 'per_step' }],
  ] as const) {
    await register({
      principal: operator,
      format: 'json',
      source: JSON.stringify({
        name,
        environment: 'dev',
        sandbox_profile: 'dev-flex',
        ...more,
        steps: [{ id: 'only', backend: 'test', action, params, retries: 1 }],
      }),
    });
  }
  const create = makeCreateRun({
    runbooks,
    runs,
    clock,
    starter: { start: async (run) => `arn:local:execution:${run.runId}` },
  });
  createRun = async (runbookId) =>
    (await create({ principal: operator, body: createRunBodySchema.parse({ runbookId }) })).runId;
  approvals = makeApprovalStore(documentClient, dynamo.tableNames.state);
  const dispatchStep = makeDispatch({
    inventory: makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 }),
    runbooks,
    runs,
    approvals,
    clock,
    callbacks,
    queue: {
      send: async (_profile, commands) => {
        sent.push(...commands);
        return [];
      },
    },
  });
  dispatch = async (runId, stepId, attempt = 1) => {
    const token = `token-${runId}-${attempt}`;
    await dispatchStep(runId, { action: 'dispatch', stepId, kind: 'step', attempt }, token);
    return token;
  };
  planNext = makePlanNext({ runbooks, runs, approvals, clock, callbacks, policy: DEFAULT_POLICY });
  reconcile = makeReconcile({
    runs,
    approvals,
    runbooks,
    workers,
    callbacks,
    queue: { send: async () => [] },
    interpreter,
    clock,
    heartbeatMs: HEARTBEAT_MS,
    log: () => undefined,
  });
});

afterAll(async () => {
  await dynamo?.local.stop();
});

/** Moves the fake clock on. */
const advance = (millis: number) => (now = new Date(now.getTime() + millis));

/**
 * A run of `runbookId` whose only step a worker leased and then stopped renewing; with `started`,
 * it died after it started the action.
 */
async function lostRun(
  runbookId: string,
  started = true,
): Promise<{ runId: string; executionId: string; token: string }> {
  const runId = await createRun(runbookId);
  const token = await dispatch(runId, 'only');
  const executionId = `${runId}.step.only.1.once`;
  const lease = await runs.acquireLease(runId, executionId, 'worker-a', now, LEASE_MS);
  expect(lease.claim).toBe('lease');
  if (started && lease.claim === 'lease') {
    const running = { ...lease.execution, status: 'running' as const, startedAt: now.toISOString() };
    await runs.mutate(runId, () => ({ events: [], writes: [writes.updateExecution(running, ['leased'], 'worker-a')] }));
  }
  return { runId, executionId, token };
}

describe('the reconciler', () => {
  it('gives a lost step that is safe to retry a new attempt and resumes the interpreter once', async () => {
    const { runId, executionId, token } = await lostRun('lost-sleep');
    resumed.length = 0;
    advance(LEASE_MS + 1000);

    const summary = await reconcile();
    expect(summary).toMatchObject({ leasesExpired: 1, recovered: 1, pausedForOperator: 0 });
    const execution = await runs.execution(runId, executionId);
    expect(execution).toMatchObject({ status: 'expired', error: { code: 'LEASE_EXPIRED', retryable: true } });
    expect(resumed.filter((r) => r.token === token)).toHaveLength(1);
    expect((await runs.load(runId))?.run.status).not.toBe('paused');

    // A second sweep finds nothing more to do.
    expect(await reconcile()).toMatchObject({ leasesExpired: 0, recovered: 0 });
    expect(resumed.filter((r) => r.token === token)).toHaveLength(1);
  });

  it('pauses the run with the reason when a lost action is not safe to retry and left no receipt', async () => {
    const { runId, executionId } = await lostRun('lost-counter');
    advance(LEASE_MS + 1000);

    const summary = await reconcile();
    expect(summary).toMatchObject({ leasesExpired: 1, pausedForOperator: 1, recovered: 0 });
    const record = await runs.load(runId);
    expect(record?.run.status).toBe('paused');
    expect(record?.run.error).toMatchObject({ code: 'LOST_NOT_SAFE_TO_RETRY' });
    expect(record?.run.error?.message).toContain('test.counter');
    expect(await runs.execution(runId, executionId)).toMatchObject({ status: 'expired' });
    const events = await runs.events(runId, 0, 100);
    const paused = events.find((e) => e.type === 'run.paused');
    expect(paused?.payload).toMatchObject({ stepId: 'only' });
    expect(String(paused?.payload.reason)).toContain('not safe to retry');
  });

  it('ends a lost unsafe action whose receipt shows it took effect with the recorded result', async () => {
    const { runId, executionId, token } = await lostRun('lost-counter');
    await runs.mutate(runId, () => ({
      events: [],
      writes: [
        writes.putReceipt({
          key: `${runId}.step.only.once`,
          executionId,
          outcome: 'succeeded',
          output: { count: 1 },
          recordedAt: now.toISOString(),
        }),
      ],
    }));
    resumed.length = 0;
    advance(LEASE_MS + 1000);

    expect(await reconcile()).toMatchObject({ leasesExpired: 1, recovered: 1, pausedForOperator: 0 });
    expect((await runs.load(runId))?.run.status).not.toBe('paused');
    expect(await runs.execution(runId, executionId)).toMatchObject({ status: 'succeeded' });
    const ended = (await runs.events(runId, 0, 100)).filter((e) => e.type === 'step.succeeded');
    expect(ended.map((e) => e.payload)).toEqual([
      { kind: 'step', attempt: 1, output: { count: 1 }, fromReceipt: true },
    ]);
    expect(resumed.filter((r) => r.token === token).map((r) => r.output)).toEqual([
      { stepId: 'only', kind: 'step', attempt: 1, succeeded: 1, failed: 0 },
    ]);
  });

  it('gives a lost unsafe action that never started a new attempt instead of pausing the run', async () => {
    const { runId, executionId } = await lostRun('lost-counter', false);
    advance(LEASE_MS + 1000);

    expect(await reconcile()).toMatchObject({ leasesExpired: 1, recovered: 1, pausedForOperator: 0 });
    expect((await runs.load(runId))?.run.status).not.toBe('paused');
    expect(await runs.execution(runId, executionId)).toMatchObject({
      status: 'expired',
      error: { code: 'LEASE_EXPIRED', retryable: true },
    });
  });

  it('does not expire a lease that is still being renewed', async () => {
    const { runId, executionId } = await lostRun('lost-sleep');
    advance(LEASE_MS - 2000);
    expect(await runs.renewLease(runId, executionId, 'worker-a', new Date(now.getTime() + LEASE_MS))).toBe(true);
    advance(LEASE_MS - 2000);

    expect(await reconcile()).toMatchObject({ leasesExpired: 0 });
    expect(await runs.execution(runId, executionId)).toMatchObject({ status: 'running', leaseOwner: 'worker-a' });
    advance(LEASE_MS);
    await reconcile();
  });

  it('declares a silent worker dead and sets a busy worker without a lease idle', async () => {
    const registeredAt = now.toISOString();
    const base = {
      hostname: 'host',
      pid: 1,
      sandboxProfile: 'dev-flex' as const,
      environment: 'dev' as const,
      backends: { test: ['noop'] },
      groups: [],
      version: 'test',
      status: 'idle' as const,
      registeredAt,
      lastHeartbeatAt: registeredAt,
      stats: { cpuPercent: 0, rssBytes: 0, tasksCompleted: 0 },
    };
    await workers.register({ ...base, workerId: 'silent' });
    await workers.register({ ...base, workerId: 'confused' });
    const { runId, executionId } = await lostRun('lost-sleep');
    // The execution finished elsewhere; the worker still shows it as current.
    advance(LEASE_MS + 1000);
    await reconcile();
    expect((await runs.execution(runId, executionId))?.status).toBe('expired');
    await workers.heartbeat('confused', {
      status: 'busy',
      at: now.toISOString(),
      currentExecutionId: executionId,
      stats: { cpuPercent: 1, rssBytes: 1, tasksCompleted: 0 },
    });
    // 'silent' has now missed three beats; 'confused' beat a moment ago.
    advance(HEARTBEAT_MS);

    const summary = await reconcile();
    expect(summary.deadWorkers).toBeGreaterThanOrEqual(1);
    expect(summary.statesFixed).toBeGreaterThanOrEqual(1);
    const listed = new Map((await workers.list()).map((w) => [w.workerId, w]));
    expect(listed.get('silent')?.status).toBe('dead');
    expect(listed.get('confused')).toMatchObject({ status: 'idle' });
    expect(listed.get('confused')?.currentExecutionId).toBeUndefined();
  });

  it('starts a new interpreter execution for a quiet run whose execution ended', async () => {
    const runId = await createRun('lost-sleep');
    interpreterStatus.set(`arn:local:execution:${runId}`, 'FAILED');
    restarted.length = 0;
    advance(61_000);

    const summary = await reconcile();
    expect(restarted).toContain(runId);
    expect(summary.statesFixed).toBeGreaterThanOrEqual(1);
    expect((await runs.load(runId))?.executionArn).toMatch(new RegExp(`${runId}-r\\d+$`));

    // The new execution runs: the next sweep leaves the run alone.
    restarted.length = 0;
    advance(61_000);
    await reconcile();
    expect(restarted).not.toContain(runId);
  });

  it('resumes an aggregate whose last result was counted but never claimed', async () => {
    const runId = await createRun('lost-sleep');
    const token = await dispatch(runId, 'only');
    // A worker recorded the result and died before it claimed the completion.
    await runs.mutate(runId, () => ({ events: [], writes: [writes.countResult(runId, 'step', 'only', 1, true)] }));
    resumed.length = 0;
    advance(61_000);

    await reconcile();
    expect(resumed.filter((r) => r.token === token)).toEqual([
      { token, output: { stepId: 'only', kind: 'step', attempt: 1, succeeded: 1, failed: 0 } },
    ]);
    expect((await runs.aggregate(runId, 'step', 'only', 1))?.completed).toBe(true);
    advance(61_000);
    await reconcile();
    expect(resumed.filter((r) => r.token === token)).toHaveLength(1);
  });

  it('resumes the interpreter again when a completion was claimed but its resume was lost', async () => {
    const runId = await createRun('lost-sleep');
    const token = await dispatch(runId, 'only');
    const cmd = sent.find((c) => c.runId === runId)!;
    expect((await runs.acquireLease(runId, cmd.executionId, 'worker-a', now, LEASE_MS)).claim).toBe('lease');
    // The worker recorded the result and claimed the completion, then died before the resume went out.
    const diesBeforeResume = stepResults({
      runs,
      callbacks: { succeed: async () => true, fail: async () => undefined },
      clock,
    });
    await diesBeforeResume.finished(cmd, 'worker-a', { outcome: 'succeeded' });
    expect((await runs.aggregate(runId, 'step', 'only', 1))?.completed).toBe(true);
    resumed.length = 0;
    advance(30_000);
    await reconcile();
    expect(resumed.filter((r) => r.token === token)).toEqual([]);

    advance(31_000);
    const summary = await reconcile();
    expect(resumed.filter((r) => r.token === token)).toEqual([
      { token, output: { stepId: 'only', kind: 'step', attempt: 1, succeeded: 1, failed: 0 } },
    ]);
    expect(summary.statesFixed).toBeGreaterThanOrEqual(1);
  });

  it('expires a gate at its hard limit, resumes the waiting task, and the step fails', async () => {
    const runId = await createRun('gated-sleep');
    const record = await runs.load(runId);
    const { requestApproval } = await import('../../shared/domain/approvals.js');
    const gate = requestApproval({
      gate: { scope: 'step', scopeId: 'only', requiredApprovals: 1, blastRadius: 'low' },
      round: 1,
      run: record?.run ?? { runId, tenantId: 'acme', requestedBy: 'olive' },
      stepId: 'only',
      proposedAction: 'test.sleep',
      rule: 'mode:per_step',
      reason: 'validation mode per_step gates every step',
      now,
      slaSeconds: 60,
      hardLimitSeconds: 120,
    });
    await runs.mutate(runId, () => ({
      events: [],
      run: { status: 'waiting_for_approval' },
      writes: [writes.putApproval(gate)],
    }));
    await runs.putWaitToken(runId, 'approval', 'approval-token', now.toISOString());
    resumed.length = 0;

    advance(61_000);
    expect(await reconcile()).toMatchObject({ approvalsEscalated: 1, approvalsExpired: 0 });
    expect((await approvals.get(runId, gate.approvalId))?.status).toBe('escalated');
    expect(resumed.filter((r) => r.token === 'approval-token')).toHaveLength(0);

    advance(60_000);
    expect(await reconcile()).toMatchObject({ approvalsEscalated: 0, approvalsExpired: 1 });
    expect((await approvals.get(runId, gate.approvalId))?.status).toBe('expired');
    expect(resumed.filter((r) => r.token === 'approval-token')).toHaveLength(1);
    const after = await runs.load(runId);
    expect(after?.run.status).toBe('running');
    const types = (await runs.events(runId, 0, 100)).map((e) => e.type);
    expect(types.filter((t) => t === 'approval.expired')).toHaveLength(2);
    expect(types).toContain('approval.resolved');
    // Nothing is due any more, and Plan fails the step rather than wait again.
    expect(await reconcile()).toMatchObject({ approvalsEscalated: 0, approvalsExpired: 0 });
    expect(await planNext(runId)).toMatchObject({
      action: 'dispatch',
      stepId: 'only',
      policy: { outcome: 'deny', rule: 'approval-expired' },
    });
  });
});

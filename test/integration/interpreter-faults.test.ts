import { makeInMemoryInventoryStore } from '../../shared/app/ports/in-memory/inventory.js';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStore } from '../../shared/adapters/dynamodb/run-store.js';
import type { Json } from '../../shared/domain/canonical.js';
import type { Principal, Run } from '../../shared/domain/entities.js';
import type { PlanDecision } from '../../shared/domain/planner.js';
import type { TaskFaults } from '../../shared/app/interpreter.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

/**
 * Plan and Dispatch against DynamoDB Local when a step cannot reach a worker: params that do not
 * render, tasks that keep failing, and a cancel that must win over both.
 */
const operator: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };
const clock = { now: () => new Date() };
const resumed: Array<{ token: string; output: Record<string, Json> }> = [];

let dynamo: TestDynamo;
let runs: RunStore;
let planNext: (runId: string, faults?: TaskFaults) => Promise<PlanDecision>;
let dispatch: (runId: string, stepId: string) => Promise<string>;
let cancel: (runId: string) => Promise<unknown>;
let storeRun: (runbookId: string, inputs: Record<string, Json>) => Promise<string>;

beforeAll(async () => {
  dynamo = await startTestDynamo('faults');
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeRunStore } = await import('../../shared/adapters/dynamodb/run-store.js');
  const { makeDynamoRunbookStore } = await import('../../shared/adapters/dynamodb/runbook-store.js');
  const { makeApprovalStore } = await import('../../shared/adapters/dynamodb/approval-store.js');
  const { makeRegisterRunbook } = await import('../../shared/app/runbooks.js');
  const { makeCancelRun } = await import('../../shared/app/runs.js');
  const { makeDispatch, makePlanNext } = await import('../../shared/app/interpreter.js');
  const { DEFAULT_POLICY } = await import('../../shared/domain/policy.js');
  runs = makeRunStore(documentClient, dynamo.tableNames);
  const runbooks = makeDynamoRunbookStore(documentClient, dynamo.tableNames.state);
  const approvals = makeApprovalStore(documentClient, dynamo.tableNames.state);
  const callbacks = {
    succeed: async (token: string, output: Record<string, Json>) => resumed.push({ token, output }) > 0,
    fail: async () => undefined,
  };
  await makeRegisterRunbook({ runbooks, clock })({
    principal: operator,
    format: 'json',
    source: JSON.stringify({
      name: 'say',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      inputs: { message: { type: 'string' } },
      steps: [{ id: 'only', backend: 'test', action: 'echo', params: { message: '{{ inputs.message }}' } }],
    }),
  });
  const deps = { runbooks, runs, approvals, clock, callbacks };
  const dispatchStep = makeDispatch({
    inventory: makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 }),
    ...deps,
    queue: { send: async () => [] },
  });
  dispatch = async (runId, stepId) => {
    const token = `token-${randomUUID()}`;
    await dispatchStep(runId, { action: 'dispatch', stepId, kind: 'step', attempt: 1 }, token);
    return token;
  };
  planNext = makePlanNext({ ...deps, policy: DEFAULT_POLICY });
  const cancelRun = makeCancelRun(deps);
  cancel = (runId) => cancelRun(operator, runId);
  storeRun = async (runbookId, inputs) => {
    const at = new Date().toISOString();
    const run: Run = {
      runId: `run-${randomUUID()}`,
      tenantId: operator.tenantId,
      runbookId,
      runbookVersion: 1,
      runbookDigest: 'stored-directly',
      status: 'queued',
      inputs,
      priority: 'normal',
      requestedBy: operator.subject,
      createdAt: at,
      updatedAt: at,
      cancelRequested: false,
    };
    await runs.create(
      run,
      [{ eventId: randomUUID(), type: 'run.created', timestamp: at, payload: {}, meta: {} }],
      undefined,
    );
    return run.runId;
  };
}, 60_000);

afterAll(async () => {
  await dynamo?.local.stop();
});

const executionOf = (runId: string) => runs.execution(runId, `${runId}.step.only.1.once`);

describe('the interpreter when a step cannot reach a worker', () => {
  it('fails the step for good when its params cannot be rendered, and resumes the dispatch task', async () => {
    const runId = await storeRun('say', {});
    expect(await planNext(runId)).toMatchObject({ action: 'dispatch', stepId: 'only' });
    const token = await dispatch(runId, 'only');
    expect(await executionOf(runId)).toMatchObject({
      status: 'failed',
      error: { code: 'PARAMS_INVALID', retryable: false, message: expect.stringContaining("input 'message'") },
    });
    expect(resumed.filter((r) => r.token === token)).toHaveLength(1);
    expect(await planNext(runId)).toMatchObject({ action: 'fail', error: { code: 'STEP_FAILED' } });
  });

  it("fails the run with DISPATCH_LOOP and the last fault once the interpreter's tasks keep failing", async () => {
    const runId = await storeRun('say', { message: 'hi' });
    await planNext(runId);
    await dispatch(runId, 'only');
    // Fewer faults than the bound: Plan goes on as before.
    expect(await planNext(runId, { count: 5 })).toMatchObject({ action: 'dispatch' });
    const decision = await planNext(runId, { count: 6, last: { Error: 'TransientQueueError', Cause: 'queue down' } });
    expect(decision).toMatchObject({ action: 'fail', error: { code: 'DISPATCH_LOOP' } });
    const record = await runs.load(runId);
    expect(record?.run).toMatchObject({ status: 'failed', error: { code: 'DISPATCH_LOOP' } });
    expect(record?.run.error?.message).toContain('TransientQueueError: queue down');
    expect(await executionOf(runId)).toMatchObject({ status: 'failed', error: { code: 'DISPATCH_LOOP' } });
    const types = (await runs.events(runId, 0, 100)).map((e) => e.type);
    expect(types.at(-1)).toBe('run.failed');
  });

  it('cancels a step no worker took yet at once, and resumes the dispatch task waiting on it', async () => {
    const runId = await storeRun('say', { message: 'hi' });
    await planNext(runId);
    const token = await dispatch(runId, 'only');
    expect(await executionOf(runId)).toMatchObject({ status: 'pending' });
    await cancel(runId);
    expect(await executionOf(runId)).toMatchObject({ status: 'cancelled' });
    expect(resumed.filter((r) => r.token === token)).toHaveLength(1);
    expect(await planNext(runId)).toEqual({ action: 'cancelled' });
    expect((await runs.load(runId))?.run.status).toBe('cancelled');
  });
});

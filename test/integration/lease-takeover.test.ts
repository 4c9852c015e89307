import { makeInMemoryInventoryStore } from '../../shared/app/ports/in-memory/inventory.js';
import { CreateQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startFauxqs, type FauxqsServer } from 'fauxqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Counters } from '../../shared/adapters/dynamodb/counters.js';
import type { RunStore } from '../../shared/adapters/dynamodb/run-store.js';
import type { StepResults } from '../../shared/app/step-results.js';
import type { RecoverLost } from '../../shared/app/recovery.js';
import type { Json } from '../../shared/domain/canonical.js';
import type { Principal } from '../../shared/domain/entities.js';
import type { StepCommand } from '../../shared/domain/messages.js';
import type { Worker } from '../../worker-container/worker.js';
import { freePort, startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

/**
 * A worker that receives the command of a step execution whose holder died (SIGKILL) after it
 * started the action: the same crash as on the local stack, made deterministic. The holder is
 * played by the test (lease, `step.started`, the effect), its lease already lapsed; the real worker
 * gets the command again from a real queue, the way SQS redelivers it after the visibility timeout.
 */
const operator: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };

let dynamo: TestDynamo;
let fauxqs: FauxqsServer;
let sqs: SQSClient;
let queueUrl: string;
let runs: RunStore;
let counters: Counters;
let results: StepResults;
let recover: RecoverLost;
let worker: Worker | undefined;
let working: Promise<void> | undefined;
let makeWorker: () => Worker;
let createRun: (runbookId: string) => Promise<string>;
const sent: StepCommand[] = [];
const resumed: Array<{ token: string; output: Record<string, Json> }> = [];
let dispatch: (runId: string, stepId: string) => Promise<StepCommand>;

beforeAll(async () => {
  dynamo = await startTestDynamo('takeover');
  fauxqs = await startFauxqs({ port: await freePort(), logger: false, defaultRegion: 'us-east-1' });
  sqs = new SQSClient({
    endpoint: `http://127.0.0.1:${fauxqs.port}`,
    region: 'us-east-1',
    useQueueUrlAsEndpoint: false,
  });
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeRunStore } = await import('../../shared/adapters/dynamodb/run-store.js');
  const { makeCounters } = await import('../../shared/adapters/dynamodb/counters.js');
  const { makeDynamoRunbookStore } = await import('../../shared/adapters/dynamodb/runbook-store.js');
  const { makeWorkerStore } = await import('../../shared/adapters/dynamodb/worker-store.js');
  const { makeApprovalStore } = await import('../../shared/adapters/dynamodb/approval-store.js');
  const { makeRegisterRunbook } = await import('../../shared/app/runbooks.js');
  const { createRunBodySchema, makeCreateRun } = await import('../../shared/app/runs.js');
  const { makeDispatch } = await import('../../shared/app/interpreter.js');
  const { makeStepResults } = await import('../../shared/app/step-results.js');
  const { makeRecoverLost } = await import('../../shared/app/recovery.js');
  const { makeTestBackend } = await import('../../worker-container/backends/test.js');
  const { Worker } = await import('../../worker-container/worker.js');
  const { makeSqsCommandSource } = await import('../../shared/adapters/sqs/command-source.js');
  const clock = { now: () => new Date() };
  runs = makeRunStore(documentClient, dynamo.tableNames);
  counters = makeCounters(documentClient, dynamo.tableNames.state);
  const runbooks = makeDynamoRunbookStore(documentClient, dynamo.tableNames.state);
  const callbacks = {
    succeed: async (token: string, output: Record<string, Json>) => resumed.push({ token, output }) > 0,
    fail: async () => undefined,
  };
  results = makeStepResults({ runs, callbacks, clock });
  recover = makeRecoverLost({ runs, callbacks });
  const register = makeRegisterRunbook({ runbooks, clock });
  for (const [name, action, params] of [
    ['takeover-counter', 'counter', { key: '{{ inputs.key }}' }],
    ['takeover-sleep', 'sleep', { ms: 50 }],
  ] as const)
    await register({
      principal: operator,
      format: 'json',
      source: JSON.stringify({
        name,
        environment: 'dev',
        sandbox_profile: 'dev-flex',
        inputs: { key: { type: 'string', default: 'none' } },
        steps: [{ id: 'only', backend: 'test', action, params, retries: 2 }],
      }),
    });
  const create = makeCreateRun({ runbooks, runs, clock, starter: { start: async (run) => `arn:${run.runId}` } });
  let keys = 0;
  createRun = async (runbookId) =>
    (
      await create({
        principal: operator,
        body: createRunBodySchema.parse({ runbookId, inputs: { key: `takeover-${++keys}` } }),
      })
    ).runId;
  const dispatchStep = makeDispatch({
    inventory: makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 }),
    runbooks,
    runs,
    approvals: makeApprovalStore(documentClient, dynamo.tableNames.state),
    clock,
    callbacks,
    queue: {
      send: async (_profile, commands) => {
        sent.push(...commands);
        return [];
      },
    },
  });
  dispatch = async (runId, stepId) => {
    await dispatchStep(runId, { action: 'dispatch', stepId, kind: 'step', attempt: 1 }, `token-${runId}`);
    const command = sent.find((c) => c.runId === runId && c.stepId === stepId);
    if (!command) throw new Error('nothing dispatched');
    return command;
  };
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'takeover-steps' }));
  queueUrl = QueueUrl ?? '';
  makeWorker = () =>
    new Worker({
      workerId: 'worker-b',
      profile: 'dev-flex',
      registration: {
        hostname: 'test',
        pid: process.pid,
        environment: 'dev',
        backends: {},
        groups: [],
        version: 'test',
      },
      workers: makeWorkerStore(documentClient, dynamo.tableNames.state),
      heartbeatMs: 1000,
      leaseMs: 30_000,
      commands: makeSqsCommandSource(sqs, queueUrl),
      runs,
      results,
      recover,
      backends: [makeTestBackend(counters)],
      secrets: { get: () => Promise.reject(new Error('no secrets here')) },
      log: () => undefined,
    });
});

afterEach(async () => {
  await worker?.stop();
  await working;
  worker = undefined;
});

afterAll(async () => {
  await fauxqs?.stop();
  await dynamo?.local.stop();
});

/** The holder: leases the command's execution with a lease that has lapsed by now, and starts it. */
async function holderLeasesAndDies(cmd: StepCommand, started: boolean): Promise<void> {
  const lease = await runs.acquireLease(cmd.runId, cmd.executionId, 'worker-a', new Date(Date.now() - 60_000), 30_000);
  expect(lease.claim).toBe('lease');
  if (started) await results.started(cmd, 'worker-a');
}

/** The command comes back from the queue to a live worker. */
async function redeliver(cmd: StepCommand): Promise<void> {
  await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(cmd) }));
  worker = makeWorker();
  working = worker.run();
}

/** Polls until the execution has ended. */
async function ended(cmd: StepCommand) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const execution = await runs.execution(cmd.runId, cmd.executionId);
    if (execution && ['succeeded', 'failed', 'timed_out', 'expired', 'cancelled'].includes(execution.status))
      return execution;
    if (Date.now() > deadline) throw new Error(`execution still ${execution?.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const startedEvents = async (runId: string) =>
  (await runs.events(runId, 0, 1000)).filter((e) => e.type === 'step.started');

describe('a worker that receives the command of an execution whose holder died', () => {
  it('never runs an unsafe action again and pauses the run for an operator', async () => {
    const runId = await createRun('takeover-counter');
    const cmd = await dispatch(runId, 'only');
    await holderLeasesAndDies(cmd, true);
    // The effect happened; the holder was killed before it wrote the receipt.
    expect(await counters.increment(String(cmd.params.key))).toBe(1);

    await redeliver(cmd);

    expect(await ended(cmd)).toMatchObject({ status: 'expired', error: { code: 'LOST_NOT_SAFE_TO_RETRY' } });
    expect(await counters.read(String(cmd.params.key))).toBe(1);
    expect(await startedEvents(runId)).toHaveLength(1);
    const record = await runs.load(runId);
    expect(record?.run).toMatchObject({ status: 'paused', error: { code: 'LOST_NOT_SAFE_TO_RETRY' } });
    expect(resumed.filter((r) => r.token === `token-${runId}`).map((r) => r.output)).toEqual([
      { stepId: 'only', kind: 'step', attempt: 1, succeeded: 0, failed: 1 },
    ]);
  });

  it('ends a started safe action as expired so it runs again only as a new attempt', async () => {
    const runId = await createRun('takeover-sleep');
    const cmd = await dispatch(runId, 'only');
    await holderLeasesAndDies(cmd, true);

    await redeliver(cmd);

    expect(await ended(cmd)).toMatchObject({ status: 'expired', error: { code: 'LEASE_EXPIRED', retryable: true } });
    expect(await startedEvents(runId)).toHaveLength(1);
    expect((await runs.load(runId))?.run.status).not.toBe('paused');
  });

  it('takes over an execution whose holder died before it started the action, as the same attempt', async () => {
    const runId = await createRun('takeover-counter');
    const cmd = await dispatch(runId, 'only');
    await holderLeasesAndDies(cmd, false);

    await redeliver(cmd);

    expect(await ended(cmd)).toMatchObject({ status: 'succeeded', attempt: 1, leaseOwner: 'worker-b' });
    expect(await counters.read(String(cmd.params.key))).toBe(1);
    expect(await startedEvents(runId)).toHaveLength(1);
  });
});

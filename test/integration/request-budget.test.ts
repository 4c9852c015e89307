import { makeInMemoryInventoryStore } from '../../shared/app/ports/in-memory/inventory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MeteredEndpoint, totalOf } from '../../local/request-meter.js';
import type { Principal } from '../../shared/domain/entities.js';
import type { StepCommand } from '../../shared/domain/messages.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';
import type { CarriedRun } from '../../shared/app/ports/runs.js';

/**
 * DynamoDB requests one step of a plain runbook may cost, from Plan to its recorded result (the
 * create and the final Plan amortised over the steps): the target, 12. Each request is
 * listed in docs/architecture.md (the path of one step). The target was 12; a short step's
 * output commits with its result, a step of one execution completes in its result's own
 * transaction, the worker chains its first record on the head its command carries, Plan
 * lists nothing for a run that has not started, the run starts in its first step's Dispatch, and
 * Dispatch writes from the run Plan carried to it, the first Plan decides on the run its creation
 * carried, and every other Plan reads the run with its executions in one request, so the budget
 * holds a three-step run to 18.
 */
const STEPS = 3;
const BUDGET_PER_STEP = 18 / STEPS;
const operator: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };

let dynamo: TestDynamo;
let meter: MeteredEndpoint;
let walk: () => Promise<void>;

beforeAll(async () => {
  dynamo = await startTestDynamo('budget');
  const { startMeteredEndpoint } = await import('../../local/request-meter.js');
  meter = await startMeteredEndpoint(dynamo.local.endpoint);
  // Every client built from here on talks to DynamoDB Local through the meter.
  process.env.AWS_ENDPOINT_URL_DYNAMODB = meter.url;
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeRunStore } = await import('../../shared/adapters/dynamodb/run-store.js');
  const { makeApprovalStore } = await import('../../shared/adapters/dynamodb/approval-store.js');
  const { makeDynamoRunbookStore } = await import('../../shared/adapters/dynamodb/runbook-store.js');
  const { cachingVersions } = await import('../../shared/app/runbook-cache.js');
  const { makeRegisterRunbook } = await import('../../shared/app/runbooks.js');
  const { createRunBodySchema, makeCreateRun } = await import('../../shared/app/runs.js');
  const { makeDispatch, makePlan } = await import('../../shared/app/interpreter.js');
  const { makeStepResults } = await import('../../shared/app/step-results.js');
  const { DEFAULT_POLICY } = await import('../../shared/domain/policy.js');
  const clock = { now: () => new Date() };
  const runs = makeRunStore(documentClient, dynamo.tableNames);
  const approvals = makeApprovalStore(documentClient, dynamo.tableNames.state);
  const runbooks = cachingVersions(makeDynamoRunbookStore(documentClient, dynamo.tableNames.state));
  const callbacks = { succeed: async () => true, fail: async () => undefined };
  await makeRegisterRunbook({ runbooks, clock })({
    principal: operator,
    format: 'json',
    source: JSON.stringify({
      name: 'budget',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: Array.from({ length: STEPS }, (_, i) => ({
        id: `noop-${i + 1}`,
        backend: 'test',
        action: 'echo',
        params: { message: 'hi' },
      })),
    }),
  });
  const sent: StepCommand[] = [];
  // The run as its creation stored it travels to the first Plan, as the execution's input does.
  const startedWith = new Map<string, CarriedRun | undefined>();
  const starter = {
    start: async (run: { runId: string }, carried?: CarriedRun) => {
      startedWith.set(run.runId, carried && (JSON.parse(JSON.stringify(carried)) as CarriedRun));
      return `arn:${run.runId}`;
    },
  };
  const create = makeCreateRun({ runbooks, runs, clock, starter });
  const plan = makePlan({ runbooks, runs, approvals, clock, callbacks, policy: DEFAULT_POLICY });
  const dispatch = makeDispatch({
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
  const results = makeStepResults({ runs, callbacks, clock });
  // The worker takes its leases through the result writer, which keeps the execution it leased.
  const leases = results.holdingLeases(runs);
  // What the interpreter and a worker do for a run, in order, without the transport between them.
  walk = async () => {
    const { runId } = await create({ principal: operator, body: createRunBodySchema.parse({ runbookId: 'budget' }) });
    let given = startedWith.get(runId);
    for (;;) {
      // Plan carries the run it decided on to Dispatch, as the interpreter's state does.
      const { decision, carried } = await plan(runId, undefined, given);
      given = undefined;
      if (decision.action !== 'dispatch') {
        expect(decision.action).toBe('succeed');
        return;
      }
      await dispatch(runId, decision, `token-${decision.stepId}`, carried && JSON.parse(JSON.stringify(carried)));
      const cmd = sent.shift();
      if (!cmd) throw new Error('nothing was sent');
      const lease = await leases.acquireLease(cmd.runId, cmd.executionId, 'worker-a', new Date(), 30_000);
      expect(lease.claim).toBe('lease');
      expect(await leases.receipt(cmd.idempotencyKey)).toBeUndefined();
      await results.started(cmd, 'worker-a');
      // A short step's output has not been flushed yet when it ends: it rides with the result.
      await results.finished(cmd, 'worker-a', { outcome: 'succeeded', output: {} }, [
        { stream: 'stdout', text: 'hi', streamSeq: 1 },
      ]);
    }
  };
}, 120_000);

afterAll(async () => {
  await meter?.close();
  await dynamo?.local.stop();
});

describe('the DynamoDB request budget', () => {
  it('runs a step, from its Plan to its recorded result, within its DynamoDB request budget', async () => {
    await walk(); // warms the runbook cache, as a warm Lambda has it
    await meter.reset();
    await walk();
    const { counts } = await meter.read();
    const perStep = totalOf(counts) / STEPS;
    console.log('DynamoDB requests per step', perStep.toFixed(2), JSON.stringify(counts));
    expect(perStep).toBeLessThanOrEqual(BUDGET_PER_STEP);
  });
});

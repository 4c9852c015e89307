import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DescribeExecutionCommand,
  ExecutionAlreadyExists,
  GetExecutionHistoryCommand,
  ListExecutionsCommand,
  ListStateMachinesCommand,
  SendTaskFailureCommand,
  SendTaskHeartbeatCommand,
  SendTaskSuccessCommand,
  SFNClient,
  StartExecutionCommand,
  StopExecutionCommand,
  TaskDoesNotExist,
} from '@aws-sdk/client-sfn';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalStepFunctions } from '../../local/stepfunctions.js';
import {
  DEFINITION_FUNCTIONS,
  type DefinitionPlaceholder,
  loadRunInterpreterDefinition,
  substituteDefinition,
} from '../../shared/workflow/definition.js';
import { freePort } from '../support/local-dynamodb.js';
import { aRun } from '../support/runs.js';
import { executionArnFor, makeSfnRunStarter } from '../../shared/adapters/sfn.js';

const ARN = 'arn:aws:states:us-east-1:000000000000:stateMachine:test-run-interpreter';

/** The deployed definition, with function names in place of ARNs; `patch` may shorten a timer. */
function definition(patch?: (asl: { States: Record<string, Record<string, unknown>> }) => void): string {
  const text = substituteDefinition(
    loadRunInterpreterDefinition(),
    Object.fromEntries(Object.entries(DEFINITION_FUNCTIONS).map(([k, v]) => [k, v])) as Record<
      DefinitionPlaceholder,
      string
    >,
  );
  const asl = JSON.parse(text) as { States: Record<string, Record<string, unknown>> };
  patch?.(asl);
  return JSON.stringify(asl);
}

const FAIL = { action: 'fail', error: { code: 'STEP_FAILED', message: "step 'a' failed: exit 1" }, rolledBack: [] };

interface Invocation {
  readonly functionName: string;
  readonly payload: Record<string, unknown>;
}

/** A scripted planner: returns the decisions in order; waiting tasks record their payload. */
function harness(decisions: Array<Record<string, unknown>>) {
  const invocations: Invocation[] = [];
  const waiting: Array<(payload: Record<string, unknown>) => void> = [];
  const invoke = async (functionName: string, payload: unknown) => {
    const p = payload as Record<string, unknown>;
    invocations.push({ functionName, payload: p });
    if (functionName === 'plan') return decisions.shift() ?? FAIL;
    waiting.shift()?.(p);
    return null;
  };
  /** Resolves with the payload of the next waiting task's invocation. */
  const nextWait = () => new Promise<Record<string, unknown>>((resolve) => waiting.push(resolve));
  return { invoke, invocations, nextWait };
}

const started: LocalStepFunctions[] = [];
afterEach(async () => {
  for (const sfn of started.splice(0)) await sfn.stop();
});

async function start(options: {
  invoke: (name: string, payload: unknown) => Promise<unknown>;
  text?: string;
  dataFile?: string;
}): Promise<{ sfn: LocalStepFunctions; client: SFNClient }> {
  const sfn = new LocalStepFunctions({
    port: await freePort(),
    stateMachineArn: ARN,
    definition: options.text ?? definition(),
    invoke: options.invoke,
    dataFile: options.dataFile,
  });
  await sfn.start();
  started.push(sfn);
  const client = new SFNClient({
    endpoint: sfn.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
  return { sfn, client };
}

async function waitForStatus(client: SFNClient, executionArn: string, status: string) {
  for (let i = 0; i < 200; i++) {
    const described = await client.send(new DescribeExecutionCommand({ executionArn }));
    if (described.status === status) return described;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`execution did not reach ${status}`);
}

describe('local Step Functions endpoint, running the deployed definition', () => {
  it('passes a real task token to Dispatch and resumes on SendTaskSuccess', async () => {
    const h = harness([{ action: 'dispatch', stepId: 'a' }, { action: 'succeed' }]);
    const { client } = await start({ invoke: h.invoke });
    const dispatched = h.nextWait();
    const { executionArn } = await client.send(
      new StartExecutionCommand({
        stateMachineArn: ARN,
        name: 'run-1',
        input: JSON.stringify({ runId: 'r1', tenantId: 't' }),
      }),
    );
    const payload = await dispatched;
    expect(payload).toMatchObject({ runId: 'r1', tenantId: 't', decision: { action: 'dispatch', stepId: 'a' } });
    expect(typeof payload.taskToken).toBe('string');
    expect(String(payload.taskToken).length).toBeGreaterThan(40);
    // The planner saw the execution name from the context object.
    expect(h.invocations[0]?.payload.executionName).toBe('run-1');

    await client.send(new SendTaskHeartbeatCommand({ taskToken: String(payload.taskToken) }));
    await client.send(new SendTaskSuccessCommand({ taskToken: String(payload.taskToken), output: '{"done":1}' }));
    const done = await waitForStatus(client, executionArn!, 'SUCCEEDED');
    // A completed dispatch resets the count of faults in a row.
    expect(JSON.parse(done.output ?? '{}')).toMatchObject({ runId: 'r1', faults: { count: 0 } });
    expect(h.invocations.map((i) => i.functionName)).toEqual(['plan', 'dispatch', 'plan']);
    // A used token is gone.
    await expect(
      client.send(new SendTaskSuccessCommand({ taskToken: String(payload.taskToken), output: '{}' })),
    ).rejects.toBeInstanceOf(TaskDoesNotExist);
  });

  it('hands the first Plan the run its creation carried, and every later Plan nothing', async () => {
    const h = harness([{ action: 'dispatch', stepId: 'a' }, { action: 'succeed' }]);
    const { client } = await start({ invoke: h.invoke });
    const dispatched = h.nextWait();
    const carried = { record: { run: { runId: 'r9', status: 'queued' } }, revision: 0 };
    const { executionArn } = await client.send(
      new StartExecutionCommand({
        stateMachineArn: ARN,
        name: 'run-9',
        input: JSON.stringify({ runId: 'r9', tenantId: 't', plan: { carried } }),
      }),
    );
    const payload = await dispatched;
    await client.send(new SendTaskSuccessCommand({ taskToken: String(payload.taskToken), output: '{}' }));
    await waitForStatus(client, executionArn!, 'SUCCEEDED');
    expect(h.invocations.map((i) => [i.functionName, i.payload.carried])).toEqual([
      ['plan', carried],
      ['dispatch', undefined],
      ['plan', null],
    ]);
  });

  it('hands the first Plan nothing when the execution carries no run (a restart)', async () => {
    const h = harness([{ action: 'succeed' }]);
    const { client } = await start({ invoke: h.invoke });
    const { executionArn } = await client.send(
      new StartExecutionCommand({ stateMachineArn: ARN, input: JSON.stringify({ runId: 'r10', tenantId: 't' }) }),
    );
    await waitForStatus(client, executionArn!, 'SUCCEEDED');
    expect(h.invocations.map((i) => [i.functionName, i.payload.carried])).toEqual([['plan', null]]);
  });

  it('routes SendTaskFailure through Catch and a back-off back to Plan, and fails with the run error as cause', async () => {
    const h = harness([{ action: 'dispatch' }, FAIL]);
    const { client } = await start({ invoke: h.invoke });
    const dispatched = h.nextWait();
    const { executionArn } = await client.send(
      new StartExecutionCommand({ stateMachineArn: ARN, input: JSON.stringify({ runId: 'r2', tenantId: 't' }) }),
    );
    const payload = await dispatched;
    await client.send(
      new SendTaskFailureCommand({
        taskToken: String(payload.taskToken),
        error: 'Capstan.StepFailed',
        cause: 'exit 1',
      }),
    );
    const failed = await waitForStatus(client, executionArn!, 'FAILED');
    expect(failed.error).toBe('Capstan.RunFailed');
    expect(failed.cause).toBe("STEP_FAILED: step 'a' failed: exit 1");
    expect(h.invocations.map((i) => i.functionName)).toEqual(['plan', 'dispatch', 'plan']);
    expect(h.invocations[2]?.payload.faults).toEqual({
      count: 1,
      waitSeconds: 1,
      last: { Error: 'Capstan.StepFailed', Cause: 'exit 1' },
    });
  });

  it('fails a waiting task whose heartbeat lapses with States.HeartbeatTimeout, caught back to Plan', async () => {
    const errors: unknown[] = [];
    let plans = 0;
    const text = definition((asl) => {
      asl.States.Dispatch!.HeartbeatSeconds = 1;
      // The planner reads the stored run; here it also gets the caught error to prove the shape.
      (asl.States.Plan!.Parameters as { Payload: Record<string, string> }).Payload['waitError.$'] = '$.waitError';
    });
    const { client } = await start({
      text,
      invoke: async (name, payload) => {
        if (name !== 'plan') return null;
        plans++;
        if (plans === 1) return { action: 'dispatch' };
        // A lapsed wait is not a fault: a long step re-attaches without counting towards the bound.
        errors.push([(payload as { waitError?: unknown }).waitError, (payload as { faults?: unknown }).faults]);
        return FAIL;
      },
    });
    const { executionArn } = await client.send(
      new StartExecutionCommand({
        stateMachineArn: ARN,
        input: JSON.stringify({ runId: 'r4', tenantId: 't', waitError: null }),
      }),
    );
    await waitForStatus(client, executionArn!, 'FAILED');
    expect(errors).toEqual([
      [
        { Error: 'States.HeartbeatTimeout', Cause: expect.stringContaining('heartbeat') },
        { count: 0, waitSeconds: 1 },
      ],
    ]);
  });

  it('stops an execution with StopExecution and refuses a reused name with other input', async () => {
    const h = harness([{ action: 'dispatch' }]);
    const { client } = await start({ invoke: h.invoke });
    const dispatched = h.nextWait();
    const input = JSON.stringify({ runId: 'r5', tenantId: 't' });
    const { executionArn } = await client.send(
      new StartExecutionCommand({ stateMachineArn: ARN, name: 'run-5', input }),
    );
    const payload = await dispatched;
    // The same name and input while running is idempotent.
    const again = await client.send(new StartExecutionCommand({ stateMachineArn: ARN, name: 'run-5', input }));
    expect(again.executionArn).toBe(executionArn);
    await expect(
      client.send(new StartExecutionCommand({ stateMachineArn: ARN, name: 'run-5', input: '{"runId":"other"}' })),
    ).rejects.toBeInstanceOf(ExecutionAlreadyExists);

    await client.send(new StopExecutionCommand({ executionArn, error: 'Capstan.Cancelled', cause: 'test' }));
    const stopped = await client.send(new DescribeExecutionCommand({ executionArn }));
    expect(stopped).toMatchObject({ status: 'ABORTED', error: 'Capstan.Cancelled' });
    expect(stopped.stopDate).toBeInstanceOf(Date);
    const aborted = await client.send(new ListExecutionsCommand({ stateMachineArn: ARN, statusFilter: 'ABORTED' }));
    expect(aborted.executions?.map((e) => e.executionArn)).toEqual([executionArn]);
    await expect(
      client.send(new SendTaskSuccessCommand({ taskToken: String(payload.taskToken), output: '{}' })),
    ).rejects.toBeInstanceOf(TaskDoesNotExist);
  });

  it('resumes a running execution after a restart, from the top of the definition', async () => {
    const dataFile = join(mkdtempSync(join(tmpdir(), 'capstan-sfn-')), 'executions.json');
    const first = harness([{ action: 'dispatch' }]);
    const one = await start({ invoke: first.invoke, dataFile });
    const dispatched = first.nextWait();
    const { executionArn } = await one.client.send(
      new StartExecutionCommand({
        stateMachineArn: ARN,
        name: 'run-6',
        input: JSON.stringify({ runId: 'r6', tenantId: 't' }),
      }),
    );
    await dispatched;
    await one.sfn.stop();

    const second = harness([{ action: 'succeed' }]);
    const two = await start({ invoke: second.invoke, dataFile });
    const done = await waitForStatus(two.client, executionArn!, 'SUCCEEDED');
    expect(JSON.parse(done.input ?? '{}')).toEqual({ runId: 'r6', tenantId: 't' });
    expect(second.invocations.map((i) => i.functionName)).toEqual(['plan']);
    expect(two.sfn.counters.stateTransitions).toBeGreaterThanOrEqual(3);
  });

  it('resumes an execution after a restart without the run its creation carried: the first Plan reads the run', async () => {
    const dataFile = join(mkdtempSync(join(tmpdir(), 'capstan-sfn-')), 'executions.json');
    const first = harness([{ action: 'dispatch' }]);
    const one = await start({ invoke: first.invoke, dataFile });
    const dispatched = first.nextWait();
    const carried = { record: { run: { runId: 'r11', status: 'queued' } }, revision: 0 };
    await one.client.send(
      new StartExecutionCommand({
        stateMachineArn: ARN,
        name: 'run-11',
        input: JSON.stringify({ runId: 'r11', tenantId: 't', plan: { carried } }),
      }),
    );
    await dispatched;
    expect(first.invocations[0]?.payload.carried).toEqual(carried);
    await one.sfn.stop();

    const second = harness([{ action: 'succeed' }]);
    const two = await start({ invoke: second.invoke, dataFile });
    await waitForStatus(two.client, executionArnFor(ARN, 'run-11'), 'SUCCEEDED');
    expect(second.invocations.map((i) => [i.functionName, i.payload.carried])).toEqual([['plan', null]]);
  });

  it("gets the run from the Step Functions starter to the first Plan, where Plan's parameters read it", async () => {
    const h = harness([{ action: 'succeed' }]);
    const { client } = await start({ invoke: h.invoke });
    const run = aRun({ runId: 'r12', tenantId: 't' });
    const carried = { record: { run, head: { seq: 1, hash: 'a'.repeat(64) }, rollbackRequested: false }, revision: 0 };
    const executionArn = await makeSfnRunStarter(client, ARN).start(run, carried);
    await waitForStatus(client, executionArn, 'SUCCEEDED');
    expect(h.invocations.map((i) => [i.functionName, i.payload.carried])).toEqual([['plan', carried]]);
  });

  it('ends a cancelled run in a Fail state, not SUCCEEDED', async () => {
    const h = harness([{ action: 'cancelled' }]);
    const { client } = await start({ invoke: h.invoke });
    const { executionArn } = await client.send(
      new StartExecutionCommand({ stateMachineArn: ARN, input: JSON.stringify({ runId: 'r7', tenantId: 't' }) }),
    );
    const done = await waitForStatus(client, executionArn!, 'FAILED');
    expect(done.error).toBe('Capstan.RunCancelled');
    expect(done.cause).toMatch(/cancelled/);
  });

  it('counts faults of waiting tasks in a row, resets them on a completed dispatch, and backs off between them', async () => {
    const seen: unknown[] = [];
    let dispatches = 0;
    // Without the back-off the loop would spin; here the waits are made zero to count quickly.
    const text = definition((asl) => {
      const parameters = asl.States.CountFault!.Parameters as Record<string, string>;
      parameters['waitSeconds.$'] = 'States.ArrayGetItem(States.Array(0, 0, 0, 0, 0, 0, 0, 0, 0, 0), $.faults.count)';
    });
    let resumeFirst: (token: string) => void = () => undefined;
    const firstToken = new Promise<string>((resolve) => (resumeFirst = resolve));
    const { client } = await start({
      text,
      invoke: async (name, payload) => {
        const p = payload as { faults?: { count: number }; taskToken?: string };
        if (name === 'plan') {
          seen.push(p.faults?.count);
          return (p.faults?.count ?? 0) >= 3 ? FAIL : { action: 'dispatch' };
        }
        dispatches++;
        if (dispatches === 2) return resumeFirst(String(p.taskToken));
        throw new Error('the queue is down');
      },
    });
    const { executionArn } = await client.send(
      new StartExecutionCommand({ stateMachineArn: ARN, input: JSON.stringify({ runId: 'r8', tenantId: 't' }) }),
    );
    // A fault, then a completed dispatch: the count starts again from zero.
    await client.send(new SendTaskSuccessCommand({ taskToken: await firstToken, output: '{}' }));
    const done = await waitForStatus(client, executionArn!, 'FAILED');
    expect(seen).toEqual([0, 1, 0, 1, 2, 3]);
    expect(done.error).toBe('Capstan.RunFailed');
  });

  it('answers GetExecutionHistory with numbered events and ListStateMachines', async () => {
    let plans = 0;
    const { client } = await start({
      invoke: async (name) => {
        if (name !== 'plan') throw new Error('the queue is down');
        plans++;
        return plans < 3 ? { action: 'dispatch' } : FAIL;
      },
    });
    const machines = await client.send(new ListStateMachinesCommand({}));
    expect(machines.stateMachines).toEqual([
      expect.objectContaining({ stateMachineArn: ARN, name: 'test-run-interpreter', type: 'STANDARD' }),
    ]);
    const { executionArn } = await client.send(
      new StartExecutionCommand({ stateMachineArn: ARN, input: JSON.stringify({ runId: 'r9', tenantId: 't' }) }),
    );
    await waitForStatus(client, executionArn!, 'FAILED');
    const { events = [] } = await client.send(new GetExecutionHistoryCommand({ executionArn }));
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events.map((e) => e.previousEventId)).toEqual(events.map((_, i) => i));
    expect(events.every((e) => e.timestamp instanceof Date)).toBe(true);
    expect(events[0]?.type).toBe('ExecutionStarted');
    expect(events.at(-1)).toMatchObject({
      type: 'ExecutionFailed',
      executionFailedEventDetails: { error: 'Capstan.RunFailed', cause: "STEP_FAILED: step 'a' failed: exit 1" },
    });
    expect(events.filter((e) => e.type === 'TaskFailed')).toHaveLength(2);
    // Each fault waits longer than the one before.
    const waits = events
      .filter((e) => e.type === 'WaitStateEntered')
      .map(
        (e) => (JSON.parse(e.stateEnteredEventDetails?.input ?? '{}') as { faults: { waitSeconds: number } }).faults,
      );
    expect(waits.map((w) => w.waitSeconds)).toEqual([1, 2]);
    const newest = await client.send(
      new GetExecutionHistoryCommand({ executionArn, reverseOrder: true, maxResults: 1 }),
    );
    expect(newest.events?.map((e) => e.type)).toEqual(['ExecutionFailed']);
    expect(newest.nextToken).toBeDefined();
  }, 15_000);
});

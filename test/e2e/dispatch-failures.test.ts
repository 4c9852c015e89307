import { randomUUID } from 'node:crypto';
import { DescribeExecutionCommand, GetExecutionHistoryCommand, SFNClient } from '@aws-sdk/client-sfn';
import { DeleteQueueCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_IDENTITIES } from '../../local/issuer.js';
import { type LocalStack, PREFIX, REGION } from '../../local/stack.js';
import type { Json } from '../../shared/domain/canonical.js';
import type { Run } from '../../shared/domain/entities.js';
import { stepQueueName } from '../../shared/resources/queues.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

/**
 * Runs whose commands a queue cannot carry, on the local stack. Their inputs are written to the
 * store directly, as a run stored before the API refused such inputs (or written by another path)
 * would be, so the dispatcher meets them whatever the API lets through.
 */
let stack: LocalStack;
let home: string;
let sfn: SFNClient;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('dispatch', {
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    log: (line) => log.push(line),
  }));
  const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
  sfn = new SFNClient({ endpoint: stack.endpoints.SFN, region: REGION, credentials });
}, 90_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const token = () => stack.issuer.tokens.operator ?? '';
const api = (method: string, path: string, body?: unknown) => callApi(stack.restUrl, token(), method, path, body);
const until = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000) =>
  waitUntil(what, probe, timeoutMs, () => log.slice(-30).join('\n'));

async function register(doc: Record<string, unknown>) {
  const response = await api('POST', '/runbooks', doc);
  expect(response.status, JSON.stringify(response.body)).toBeLessThan(300);
}

/** Stores a run with `inputs` as they are (no API validation) and starts its interpreter. */
async function injectRun(runbookId: string, inputs: Record<string, Json>): Promise<{ runId: string; arn: string }> {
  const { runDeps } = await import('../../functions/dependencies.js');
  const deps = runDeps();
  const tenantId = LOCAL_IDENTITIES.operator?.tenant ?? 'local';
  const head = await deps.runbooks.head(tenantId, runbookId);
  const version = head && (await deps.runbooks.get(tenantId, runbookId, head.latestVersion));
  if (!version) throw new Error(`runbook ${runbookId} is not stored`);
  const now = new Date().toISOString();
  const run: Run = {
    runId: `run-${randomUUID()}`,
    tenantId: version.tenantId,
    runbookId,
    runbookVersion: version.version,
    runbookDigest: version.digest,
    status: 'queued',
    inputs,
    priority: 'normal',
    requestedBy: 'injected',
    createdAt: now,
    updatedAt: now,
    cancelRequested: false,
  };
  const created = { eventId: randomUUID(), type: 'run.created' as const, timestamp: now, payload: {}, meta: {} };
  await deps.runs.create(run, [created], undefined);
  const arn = await deps.starter.start(run);
  await deps.runs.mutate(run.runId, () => ({ events: [], executionArn: arn }));
  return { runId: run.runId, arn };
}

const detail = async (runId: string) => (await api('GET', `/runs/${runId}`)).body;

const settled = (runId: string, statuses: readonly string[], timeoutMs?: number) =>
  until(
    `run ${runId} to be ${statuses.join(' or ')}`,
    async () => {
      const body = await detail(runId);
      return statuses.includes(String(body.status)) ? body : undefined;
    },
    timeoutMs,
  );

/** How many times the execution entered Plan, from its Step Functions history. */
async function planEntries(executionArn: string): Promise<number> {
  const { events = [] } = await sfn.send(new GetExecutionHistoryCommand({ executionArn }));
  return events.filter((e) => e.type === 'TaskStateEntered' && e.stateEnteredEventDetails?.name === 'Plan').length;
}

describe('dispatch of commands a queue cannot carry', () => {
  it('carries a param holding U+FFFE and an emoji to the worker unchanged', async () => {
    await register({
      name: 'echo-input',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      inputs: { message: { type: 'string' } },
      steps: [{ id: 'say', backend: 'test', action: 'echo', params: { message: '{{ inputs.message }}' } }],
    });
    const message = 'before\uFFFEafter \u{1F680} done';
    const { runId } = await injectRun('echo-input', { message });
    const run = await settled(runId, ['succeeded', 'failed', 'cancelled'], 15_000);
    expect(run.status).toBe('succeeded');
    const [step] = run.steps as Array<{ targets: Array<{ outputTail: string[] }> }>;
    expect(step?.targets[0]?.outputTail).toEqual([message]);
  });

  it('fails the step and the run with the reason when the command is too large, without looping', async () => {
    await register({
      name: 'echo-large',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      inputs: { blob: { type: 'string' } },
      steps: [
        {
          id: 'big',
          backend: 'test',
          action: 'echo',
          // Four copies of a 300 KB input: past what any SQS queue takes in one message.
          params: { message: '{{ inputs.blob }}{{ inputs.blob }}{{ inputs.blob }}{{ inputs.blob }}' },
        },
        { id: 'after', backend: 'test', action: 'echo', params: { message: 'never' } },
      ],
    });
    const started = Date.now();
    const { runId, arn } = await injectRun('echo-large', { blob: 'x'.repeat(300_000) });
    const run = await settled(runId, ['succeeded', 'failed', 'cancelled'], 15_000);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({
      code: 'STEP_FAILED',
      stepId: 'big',
      message: expect.stringContaining('MESSAGE_TOO_LARGE'),
    });
    const [big, after] = run.steps as Array<{ status: string; targets: Array<{ status: string; error?: unknown }> }>;
    expect(big?.status).toBe('failed');
    expect(big?.targets[0]).toMatchObject({
      status: 'failed',
      error: { code: 'COMMAND_REJECTED', retryable: false },
    });
    expect(after?.status).toBe('skipped');
    const execution = await until('the execution to end', async () => {
      const described = await sfn.send(new DescribeExecutionCommand({ executionArn: arn }));
      return described.status === 'RUNNING' ? undefined : described;
    });
    expect(execution).toMatchObject({ status: 'FAILED', error: 'Capstan.RunFailed' });
    expect(execution.cause).toContain('MESSAGE_TOO_LARGE');
    // Plan, Dispatch (which fails the step and resumes), Plan: no loop.
    expect(await planEntries(arn)).toBe(2);
    expect(log.some((line) => line.includes('FAILED (Capstan.RunFailed: STEP_FAILED'))).toBe(true);
  });

  it('ends a run whose queue keeps failing cancelled when an operator cancels it mid-loop', async () => {
    // A profile whose queue is gone: every send fails, and the interpreter backs off between tries.
    await register({
      name: 'no-queue',
      environment: 'staging',
      sandbox_profile: 'staging-standard',
      steps: [{ id: 'one', backend: 'test', action: 'echo', params: { message: 'hi' } }],
    });
    const sqs = new SQSClient({
      endpoint: stack.endpoints.SQS,
      region: REGION,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const { QueueUrl } = await sqs.send(
      new GetQueueUrlCommand({ QueueName: stepQueueName(PREFIX, 'staging-standard') }),
    );
    await sqs.send(new DeleteQueueCommand({ QueueUrl }));
    const { runId, arn } = await injectRun('no-queue', {});
    await until('two dispatch faults', async () => ((await planEntries(arn)) >= 3 ? true : undefined));
    const cancel = await api('POST', `/runs/${runId}/cancel`);
    expect(cancel.status).toBe(202);
    const run = await settled(runId, ['cancelled', 'failed', 'succeeded'], 15_000);
    expect(run.status).toBe('cancelled');
    const [step] = run.steps as Array<{ status: string }>;
    expect(step?.status).toBe('cancelled');
    const execution = await until('the execution to end', async () => {
      const described = await sfn.send(new DescribeExecutionCommand({ executionArn: arn }));
      return described.status === 'RUNNING' ? undefined : described;
    });
    expect(execution).toMatchObject({ status: 'FAILED', error: 'Capstan.RunCancelled' });
    // The faults were spaced by the back-off (1 s, then 2 s), never a hot loop.
    expect(await planEntries(arn)).toBeLessThanOrEqual(5);
  }, 40_000);
});

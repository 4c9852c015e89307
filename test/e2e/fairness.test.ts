import { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import { makeSqsQueueDepth } from '../../shared/adapters/sqs/queue-depth.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

const MAX_BACKLOG = 6;

let stack: LocalStack;
let home: string | undefined;
let sqs: SQSClient;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('fairness', {
    workers: { 'dev-flex': 2 },
    reconcileIntervalMs: 3_600_000,
    admitIntervalMs: 500,
    env: { CAPSTAN_CAPACITY: JSON.stringify({ 'dev-flex': { maxBacklog: MAX_BACKLOG } }) },
    log: (line) => log.push(line),
  }));
  sqs = new SQSClient({
    endpoint: stack.endpoints.SQS,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    useQueueUrlAsEndpoint: false,
  });
}, 60_000);

afterAll(async () => {
  sqs?.destroy();
  await stopTestStack(stack, home);
});

const tokens = () => stack.issuer.tokens;
const api = (method: string, path: string, body?: unknown, as = tokens().operator ?? '') =>
  callApi(stack.restUrl, as, method, path, body);

async function register(name: string, step: Record<string, unknown>, as?: string) {
  const doc = {
    name,
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [{ id: 'only', backend: 'test', ...step }],
  };
  expect((await api('POST', '/runbooks', doc, as)).status).toBeLessThan(300);
}

async function create(runbookId: string, count: number, as?: string) {
  const runs: Array<{ runId: string; status: string }> = [];
  for (let wave = 0; wave < count; wave += 25) {
    const created = await Promise.all(
      Array.from({ length: Math.min(25, count - wave) }, () => api('POST', '/runs', { runbookId }, as)),
    );
    for (const response of created) {
      expect(response.status, JSON.stringify(response.body)).toBe(202);
      runs.push({ runId: String(response.body.runId), status: String(response.body.status) });
    }
  }
  return runs;
}

const events = async (runId: string, as?: string) =>
  (await api('GET', `/runs/${runId}/events?limit=1000`, undefined, as)).body.events as RunEvent[];

async function allSucceeded(runIds: readonly string[], timeoutMs: number, as?: string) {
  await until(
    `${runIds.length} runs to succeed`,
    async () => {
      const statuses = await Promise.all(
        runIds.map(async (id) => String((await api('GET', `/runs/${id}`, undefined, as)).body.status)),
      );
      if (statuses.some((s) => s === 'failed' || s === 'cancelled')) throw new Error(`a run ended ${statuses}`);
      return statuses.every((s) => s === 'succeeded') ? true : undefined;
    },
    timeoutMs,
    () => log.slice(-20).join('\n'),
  );
}

const startedAt = (list: readonly RunEvent[]) =>
  Date.parse(String(list.find((e) => e.type === 'run.started')?.timestamp));

describe('backpressure and fairness on the local stack', () => {
  it('holds new runs while the profile queue is past its bound and admits them once it falls', async () => {
    await register('bp-slow', { action: 'sleep', params: { ms: 1000 } });
    const filling = await create('bp-slow', 12);
    const depth = makeSqsQueueDepth(sqs, 'capstan');
    await until('the dev-flex queue to pass its bound', async () =>
      (await depth.depth('dev-flex')).visible >= MAX_BACKLOG ? true : undefined,
    );
    const held = await create('bp-slow', 3);
    expect(held.map((r) => r.status)).toEqual(['throttled', 'throttled', 'throttled']);
    for (const run of held)
      expect((await events(run.runId)).find((e) => e.type === 'run.throttled')?.payload).toMatchObject({
        limit: 'backlog',
        source: 'dev-flex',
      });
    await allSucceeded(
      [...filling, ...held].map((r) => r.runId),
      90_000,
    );
    for (const run of held) expect((await events(run.runId)).some((e) => e.type === 'run.admitted')).toBe(true);
  }, 120_000);

  it('starts a second tenant’s runs before a first tenant’s flood of 100 drains', async () => {
    const other = tokens().otherTenant ?? '';
    await register('fair-flood', { action: 'echo', params: { message: 'flood' } });
    await register('fair-late', { action: 'echo', params: { message: 'late' } }, other);
    const quota = (maxActive: number) => ({ runbook: '*', maxActive });
    expect((await api('PUT', '/quotas/*', quota(3), tokens().admin)).status).toBe(200);
    expect((await api('PUT', '/quotas/*', quota(2), other)).status).toBe(200);

    const began = Date.now();
    const flood = await create('fair-flood', 100);
    const submitted = Date.now();
    const late = await create('fair-late', 5, other);
    await allSucceeded(
      late.map((r) => r.runId),
      120_000,
      other,
    );
    await allSucceeded(
      flood.map((r) => r.runId),
      240_000,
    );

    const floodStarts = (await Promise.all(flood.map(async (r) => startedAt(await events(r.runId))))).sort(
      (a, b) => a - b,
    );
    const lateStarts = (await Promise.all(late.map(async (r) => startedAt(await events(r.runId, other))))).sort(
      (a, b) => a - b,
    );
    const lastLate = lateStarts.at(-1) ?? Infinity;
    const floodBefore = floodStarts.filter((t) => t < lastLate).length;
    const drained = floodStarts.at(-1) ?? 0;
    console.log(
      `fairness: flood of 100 submitted in ${submitted - began} ms and drained (last start) ${drained - began} ms ` +
        `after its first request; the 5 late runs started ${lateStarts.map((t) => t - submitted).join(', ')} ms ` +
        `after they were sent, all of them while ${100 - floodBefore} flood runs had not started`,
    );
    expect(lastLate).toBeLessThan(drained);
    // The late tenant waits for its own limit only, not behind the flood's backlog.
    expect(floodBefore).toBeLessThan(50);
  }, 400_000);
});

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { type LocalStack, LOCAL_NAMES } from '../../local/stack.js';
import { makeCounters } from '../../shared/adapters/dynamodb/counters.js';
import { verifyChain, type RunEvent } from '../../shared/domain/events.js';
import { callApi } from '../support/stack-api.js';
import { startRelayedWorker } from '../support/relayed-worker.js';
import { makeTestBackend } from '../../worker-container/backends/test.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

let stack: LocalStack;
let home: string;
let token: string;
let otherTenant: string;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('runs', {
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    log: (line) => log.push(line),
  }));
  token = stack.issuer.tokens.operator!;
  otherTenant = stack.issuer.tokens.otherTenant!;
}, 60_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}, as = token) =>
  callApi(stack.restUrl, as, method, path, body, headers);

async function register(doc: Record<string, unknown>) {
  const response = await api('POST', '/runbooks', doc);
  expect(response.status).toBeLessThan(300);
}

async function startRun(runbookId: string, key = crypto.randomUUID()) {
  const response = await api('POST', '/runs', { runbookId }, { 'idempotency-key': key });
  expect(response.status).toBe(202);
  return String(response.body.runId);
}

async function waitForRun(runId: string, statuses: string[], timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api('GET', `/runs/${runId}`);
    if (statuses.includes(String(body.status))) return body;
    if (Date.now() > deadline)
      throw new Error(
        `run ${runId} is ${String(body.status)}, not ${statuses.join('|')}\n${log.slice(-20).join('\n')}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function events(runId: string): Promise<RunEvent[]> {
  const { body } = await api('GET', `/runs/${runId}/events?limit=1000`);
  return body.events as RunEvent[];
}

const runbook = (name: string, steps: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
  name,
  environment: 'dev',
  sandbox_profile: 'dev-flex',
  steps: steps.map((s) => ({ backend: 'test', ...s })),
  ...extra,
});

const rollbackEcho = (message: string) => ({ backend: 'test', action: 'echo', params: { message } });

describe('runs on the local stack', () => {
  it('runs three steps to succeeded with a gap-free, hash-chained log a WebSocket subscriber sees in order', async () => {
    await register(
      runbook('three', [
        { id: 'one', action: 'echo', params: { message: 'one' } },
        { id: 'two', action: 'sleep', params: { ms: 100 } },
        { id: 'three', action: 'echo', params: { message: 'three' } },
      ]),
    );
    const runId = await startRun('three');
    const socket = new WebSocket(`${stack.wsUrl}?token=${token}`);
    const seen: RunEvent[] = [];
    socket.on('message', (data: Buffer) => seen.push(JSON.parse(data.toString()) as RunEvent));
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ action: 'subscribe', runId }));

    const run = await waitForRun(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('succeeded');
    expect((run.steps as Array<{ status: string }>).map((s) => s.status)).toEqual([
      'succeeded',
      'succeeded',
      'succeeded',
    ]);
    const log = await events(runId);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    expect(verifyChain(log)).toMatchObject({ valid: true, count: log.length });
    expect(log.at(0)?.type).toBe('run.created');
    expect(log.at(-1)?.type).toBe('run.succeeded');

    const deadline = Date.now() + 10_000;
    while (seen.length < log.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    socket.close();
    expect(seen.map((e) => e.seq)).toEqual(log.map((e) => e.seq));
    expect(seen.map((e) => e.hash)).toEqual(log.map((e) => e.hash));
  });

  it('resubscribing with lastEventId N sends N+1 onward exactly once', async () => {
    const runId = await startRun('three');
    await waitForRun(runId, ['succeeded']);
    const all = await events(runId);
    const n = 4;
    const socket = new WebSocket(`${stack.wsUrl}?token=${token}`);
    const seen: number[] = [];
    socket.on('message', (data: Buffer) => seen.push((JSON.parse(data.toString()) as RunEvent).seq));
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ action: 'subscribe', runId, lastEventId: n }));
    const deadline = Date.now() + 10_000;
    while (seen.length < all.length - n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 300));
    socket.close();
    expect(seen).toEqual(all.slice(n).map((e) => e.seq));
  });

  it('keeps another tenant out and refuses bad input with the field named', async () => {
    const runId = await startRun('three');
    expect((await api('GET', `/runs/${runId}`, undefined, {}, otherTenant)).status).toBe(404);
    expect((await api('POST', `/runs/${runId}/cancel`, undefined, {}, otherTenant)).status).toBe(404);
    const bad = await api('POST', '/runs', { runbookId: 'three', priority: 'urgent' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('priority');
    const missing = await api('POST', '/runs', { runbookId: 'nope' });
    expect(missing.status).toBe(404);
    await waitForRun(runId, ['succeeded']);
  });

  it('returns the same run for the same Idempotency-Key and 409 for another body', async () => {
    const key = crypto.randomUUID();
    const first = await api('POST', '/runs', { runbookId: 'three' }, { 'idempotency-key': key });
    const again = await api('POST', '/runs', { runbookId: 'three' }, { 'idempotency-key': key });
    expect(again.body.runId).toBe(first.body.runId);
    const conflict = await api('POST', '/runs', { runbookId: 'three', priority: 'high' }, { 'idempotency-key': key });
    expect(conflict.status).toBe(409);
    await waitForRun(String(first.body.runId), ['succeeded']);
    const listed = await api('GET', '/runs?status=succeeded&limit=2');
    expect((listed.body.runs as unknown[]).length).toBe(2);
    expect(listed.body.nextCursor).toBeDefined();
  });

  it('retries a flaky step and succeeds on the third attempt', async () => {
    await register(runbook('flaky', [{ id: 'shaky', action: 'flaky', params: { fail_times: 2 }, retries: 2 }]));
    const runId = await startRun('flaky');
    const run = await waitForRun(runId, ['succeeded', 'failed'], 40_000);
    expect(run.status).toBe('succeeded');
    const step = (run.steps as Array<{ attempts: number }>)[0];
    expect(step?.attempts).toBe(3);
    expect((run.attempts as Array<{ status: string }>).map((a) => a.status)).toEqual(['failed', 'failed', 'succeeded']);
  }, 60_000);

  it('rolls back the earlier steps in reverse order when a fail-fast step fails', async () => {
    await register(
      runbook('rollback', [
        { id: 'first', action: 'echo', params: { message: '1' }, rollback: rollbackEcho('undo 1') },
        { id: 'second', action: 'echo', params: { message: '2' }, rollback: rollbackEcho('undo 2') },
        { id: 'boom', action: 'fail', params: { message: 'broken', retryable: false } },
        { id: 'never', action: 'echo', params: { message: 'no' } },
      ]),
    );
    const runId = await startRun('rollback');
    const run = await waitForRun(runId, ['succeeded', 'failed']);
    expect(run.status).toBe('failed');
    const log = await events(runId);
    const rollbacks = log
      .filter((e) => e.type === 'step.succeeded' && e.payload.kind === 'rollback')
      .map((e) => e.stepId);
    expect(rollbacks).toEqual(['second', 'first']);
    expect(log.map((e) => e.type)).toContain('rollback.started');
    expect(log.map((e) => e.type)).toContain('rollback.completed');
    expect(log.some((e) => e.stepId === 'never')).toBe(false);
  });

  it('under continue, runs always steps after a failure and on_failure steps only after one', async () => {
    await register(
      runbook(
        'continue',
        [
          { id: 'boom', action: 'fail', params: { message: 'x', retryable: false } },
          { id: 'cleanup', action: 'echo', params: { message: 'c' }, condition: 'always' },
          { id: 'alert', action: 'echo', params: { message: 'a' }, condition: 'on_failure' },
          { id: 'verify', action: 'echo', params: { message: 'v' } },
        ],
        { strategy: 'continue' },
      ),
    );
    const failed = await waitForRun(await startRun('continue'), ['succeeded', 'failed']);
    expect(failed.status).toBe('failed');
    expect((failed.steps as Array<{ id: string; status: string }>).map((s) => `${s.id}:${s.status}`)).toEqual([
      'boom:failed',
      'cleanup:succeeded',
      'alert:succeeded',
      'verify:skipped',
    ]);
    await register(
      runbook(
        'continue-ok',
        [
          { id: 'fine', action: 'echo', params: { message: 'f' } },
          { id: 'alert', action: 'echo', params: { message: 'a' }, condition: 'on_failure' },
        ],
        { strategy: 'continue' },
      ),
    );
    const ok = await waitForRun(await startRun('continue-ok'), ['succeeded', 'failed']);
    expect(ok.status).toBe('succeeded');
    expect((ok.steps as Array<{ status: string }>).map((s) => s.status)).toEqual(['succeeded', 'skipped']);
  });

  it('cancels a run during a sleep step', async () => {
    await register(
      runbook('sleepy', [
        { id: 'nap', action: 'sleep', params: { ms: 1500 } },
        { id: 'after', action: 'echo', params: { message: 'no' } },
      ]),
    );
    const runId = await startRun('sleepy');
    const deadline = Date.now() + 10_000;
    while (!(await events(runId)).some((e) => e.type === 'step.started') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect((await api('POST', `/runs/${runId}/cancel`)).status).toBe(202);
    const run = await waitForRun(runId, ['cancelled', 'succeeded', 'failed']);
    expect(run.status).toBe('cancelled');
    expect((await events(runId)).some((e) => e.stepId === 'after')).toBe(false);
  });

  it('runs each counter side effect once when every command is delivered twice', async () => {
    // No stack worker serves staging-standard: a relay sends each command twice to a worker of its own.
    const doc = DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: stack.endpoints.DYNAMODB }));
    const counters = makeCounters(doc, LOCAL_NAMES.tables.state);
    const { stop } = await startRelayedWorker(stack, {
      from: 'staging-standard',
      profile: 'staging-standard',
      copies: 2,
      workerId: 'test-doubled-worker',
      backends: [makeTestBackend(counters)],
    });
    try {
      const key = `twice-${crypto.randomUUID()}`;
      await register(
        runbook(
          'twice',
          [
            { id: 'a', action: 'counter', params: { key: `${key}-a` } },
            { id: 'b', action: 'counter', params: { key: `${key}-b` } },
            { id: 'c', action: 'counter', params: { key: `${key}-c` } },
          ],
          { environment: 'staging', sandbox_profile: 'staging-standard' },
        ),
      );
      const run = await waitForRun(await startRun('twice'), ['succeeded', 'failed']);
      expect(run.status).toBe('succeeded');
      for (const step of ['a', 'b', 'c']) expect(await counters.read(`${key}-${step}`)).toBe(1);
    } finally {
      await stop();
    }
  }, 60_000);
});

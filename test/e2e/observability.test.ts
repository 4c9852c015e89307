import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import type { SpanRecord } from '../../shared/observability/tracing.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

let stack: LocalStack;
let home: string;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('observability', {
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    env: { POWERTOOLS_LOG_LEVEL: 'INFO' },
    log: (line) => log.push(line),
  }));
}, 60_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  callApi(stack.restUrl, stack.issuer.tokens.operator ?? '', method, path, body, headers);

describe('observability on the local stack', () => {
  it('traces a step from the Dispatch span through the queue to the worker, and names the run on its lines', async () => {
    const runbook = {
      name: 'observed-echo',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'say', backend: 'test', action: 'echo', params: { message: 'hello' } }],
    };
    expect((await api('POST', '/runbooks', runbook)).status).toBeLessThan(300);
    const created = await api(
      'POST',
      '/runs',
      { runbookId: 'observed-echo' },
      { 'idempotency-key': crypto.randomUUID() },
    );
    const runId = String(created.body.runId);
    await until(
      'the run succeeds',
      async () => {
        const { body } = await api('GET', `/runs/${runId}`);
        return body.status === 'succeeded' ? body : undefined;
      },
      30_000,
      () => log.slice(-20).join('\n'),
    );
    const spans = await until(
      'the step span is written',
      async () => {
        const lines = readFileSync(join(home, 'traces.jsonl'), 'utf8').trim().split('\n');
        const all = lines.map((line) => JSON.parse(line) as SpanRecord);
        return all.some((s) => s.name === 'step.execute' && s.attributes.runId === runId) ? all : undefined;
      },
      10_000,
      () => 'no step.execute span',
    );
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const step = spans.find((s) => s.name === 'step.execute' && s.attributes.runId === runId);
    const ancestors: string[] = [];
    for (let span = step; span?.parentId !== undefined; span = byId.get(span.parentId)) {
      const parent = byId.get(span.parentId);
      if (parent) ancestors.push(parent.name);
      else break;
    }
    expect(ancestors).toContain('dispatch');

    const workerLines = log
      .filter((line) => line.includes('"service":"capstan-worker"') && line.includes('"executionId"'))
      .map((line) => JSON.parse(line.slice(line.indexOf('{'))) as Record<string, unknown>);
    expect(workerLines.length).toBeGreaterThan(0);
    // The stack ran this one run: every worker line about a step execution is one of its lines.
    for (const line of workerLines) expect(line.runId).toBe(runId);
  }, 60_000);

  it("answers dashboard figures that match the runs created, for the caller's tenant only", async () => {
    const runbooks = [
      { name: 'dash-echo', steps: [{ id: 'say', backend: 'test', action: 'echo', params: { message: 'hi' } }] },
      { name: 'dash-fail', steps: [{ id: 'boom', backend: 'test', action: 'fail', params: { message: 'no' } }] },
    ];
    for (const { name, steps } of runbooks) {
      const doc = { name, environment: 'dev', sandbox_profile: 'dev-flex', steps };
      expect((await api('POST', '/runbooks', doc)).status).toBeLessThan(300);
    }
    const created: string[] = [];
    for (const runbookId of ['dash-echo', 'dash-echo', 'dash-echo', 'dash-fail', 'dash-fail']) {
      const reply = await api('POST', '/runs', { runbookId }, { 'idempotency-key': crypto.randomUUID() });
      expect(reply.status).toBe(202);
      created.push(String(reply.body.runId));
    }
    const statuses = await until(
      'every run created ends',
      async () => {
        const all = await Promise.all(created.map(async (id) => String((await api('GET', `/runs/${id}`)).body.status)));
        return all.every((s) => ['succeeded', 'failed'].includes(s)) ? all : undefined;
      },
      60_000,
      () => log.slice(-20).join('\n'),
    );
    expect(statuses.filter((s) => s === 'failed')).toHaveLength(2);

    // What the tenant's run list says, run by run, is what the dashboard counts.
    const listed = (await api('GET', '/runs?limit=100')).body.runs as Array<{ status: string }>;
    const expected: Record<string, number> = {};
    for (const run of listed) expected[run.status] = (expected[run.status] ?? 0) + 1;
    const { status, body } = await api('GET', '/dashboard/metrics');
    expect(status).toBe(200);
    const figures = body as {
      tenantId: string;
      runs: { byStatus: Record<string, number>; counted: number; complete: boolean };
      approvals: { waiting: number; oldestWaitingSeconds: number | null };
      failures: { lastHour: number };
      queues?: Record<string, number>;
      workers?: Record<string, number>;
    };
    expect(figures.tenantId).toBe('local');
    expect(figures.runs).toMatchObject({ counted: listed.length, complete: true });
    expect(Object.fromEntries(Object.entries(figures.runs.byStatus).filter(([, n]) => n > 0))).toEqual(expected);
    expect(figures.runs.byStatus.failed).toBe(2);
    expect(figures.failures.lastHour).toBe(2);
    expect(figures.approvals).toEqual({ waiting: 0, oldestWaitingSeconds: null });
    // The local tenant is the platform tenant: it sees the shared queue and its worker.
    expect(figures.queues?.['dev-flex']).toBe(0);
    expect((figures.workers?.idle ?? 0) + (figures.workers?.busy ?? 0)).toBe(1);

    const other = await callApi(stack.restUrl, stack.issuer.tokens.otherTenant ?? '', 'GET', '/dashboard/metrics');
    expect(other.status).toBe(200);
    const theirs = other.body as typeof figures;
    expect(theirs.tenantId).toBe('other');
    expect(Object.values(theirs.runs.byStatus).every((n) => n === 0)).toBe(true);
    expect(theirs.failures.lastHour).toBe(0);
    expect(theirs.queues).toBeUndefined();
    expect(theirs.workers).toBeUndefined();
  }, 90_000);

  it('records an approval.wait span for a gate, and names the run on every Lambda line while it runs', async () => {
    const doc = {
      name: 'observed-gate',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'risky', backend: 'test', action: 'echo', params: { message: 'ok' }, blast_radius: 'high' }],
    };
    expect((await api('POST', '/runbooks', doc)).status).toBeLessThan(300);
    // The handlers run in this process and log to its stdout, as Lambda's runtime would collect them.
    const lambdaOutput: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      lambdaOutput.push(String(chunk));
      return write(chunk, ...rest);
    }) as typeof process.stdout.write;
    const created = await api(
      'POST',
      '/runs',
      { runbookId: 'observed-gate' },
      { 'idempotency-key': crypto.randomUUID() },
    );
    const runId = String(created.body.runId);
    const as = (who: string) => stack.issuer.tokens[who] ?? '';
    const approvalId = await until('the gate is requested', async () => {
      const { body } = await api('GET', `/runs/${runId}/events?limit=100`);
      const found = (body.events as Array<{ type: string; payload: { approvalId?: string } }>).find(
        (e) => e.type === 'approval.requested',
      );
      return found?.payload.approvalId;
    });
    for (const who of ['approver', 'approver2']) {
      const decided = await callApi(stack.restUrl, as(who), 'POST', `/runs/${runId}/approvals/${approvalId}`, {
        decision: 'approve',
      });
      expect(decided.status).toBe(200);
    }
    await until('the gated run succeeds', async () => {
      const { body } = await api('GET', `/runs/${runId}`);
      return body.status === 'succeeded' ? body : undefined;
    }).finally(() => {
      process.stdout.write = write;
    });

    const spans = readFileSync(join(home, 'traces.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SpanRecord);
    const wait = spans.find((s) => s.name === 'approval.wait' && s.attributes.runId === runId);
    expect(wait?.attributes).toMatchObject({ approvalId, status: 'approved' });
    expect(wait && wait.endTime >= wait.startTime).toBe(true);

    // Only this run was active meanwhile: every line a Lambda handler logged names it.
    const lambdaLines = lambdaOutput
      .flatMap((chunk) => chunk.split('\n'))
      .filter((line) => line.startsWith('{') && line.includes('"function_name"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lambdaLines.length).toBeGreaterThan(0);
    const unnamed = lambdaLines.filter((line) => line.runId !== runId);
    expect(unnamed.map((line) => `${String(line.service)}: ${String(line.message)}`)).toEqual([]);
  }, 60_000);
});

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
});

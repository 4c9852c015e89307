import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type LocalStack } from '../../local/stack.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

let stack: LocalStack;
let home: string;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('bus-down', {
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    // The functions' bus is unreachable: every lifecycle publication fails.
    env: { AWS_ENDPOINT_URL_EVENTBRIDGE: 'http://127.0.0.1:9' },
    log: (line) => log.push(line),
  }));
}, 90_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

it('ends a run normally while the event bus refuses every lifecycle event', async () => {
  const token = stack.issuer.tokens.operator!;
  const hello = readFileSync(join(import.meta.dirname, '..', '..', 'examples', 'runbooks', 'hello.yaml'), 'utf8');
  expect((await callApi(stack.restUrl, token, 'POST', '/runbooks', hello)).status).toBeLessThan(300);
  const created = await callApi(
    stack.restUrl,
    token,
    'POST',
    '/runs',
    { runbookId: 'hello', ticket: { id: 'INC-BUS', source: 'cli' } },
    { 'idempotency-key': 'bus-down-1' },
  );
  expect(created.status).toBe(202);
  const run = await until(
    'the run to end',
    async () => {
      const { body } = await callApi(stack.restUrl, token, 'GET', `/runs/${String(created.body.runId)}`);
      return ['succeeded', 'failed', 'cancelled'].includes(String(body.status)) ? body : undefined;
    },
    60_000,
    () => log.slice(-20).join('\n'),
  );
  expect(run.status).toBe('succeeded');
  const record = join(home, 'data', 'eventbridge.jsonl');
  const published = existsSync(record) ? readFileSync(record, 'utf8') : '';
  expect(published).not.toContain(String(created.body.runId));
  // The ticket is free again: the run's end released it although nothing was published.
  const next = await callApi(
    stack.restUrl,
    token,
    'POST',
    '/runs',
    { runbookId: 'hello', ticket: { id: 'INC-BUS', source: 'cli' } },
    { 'idempotency-key': 'bus-down-2' },
  );
  expect(next.status).toBe(202);
});

import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack } from '../../local/stack.js';
import { type RunEvent, verifyChain } from '../../shared/domain/events.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

const ROOT = join(import.meta.dirname, '..', '..');
/** The worker's documented per-execution output cap (docs/backends.md). */
const OUTPUT_CAP_BYTES = 64 * 1024;

let stack: LocalStack;
let home: string;
let token: string;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('steps', {
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    env: {
      CAPSTAN_SCRIPTS_DIR: join(ROOT, 'test', 'fixtures', 'scripts'),
      // A script is a destructive action: this deployment's policy lets it run in dev without two approvers.
      CAPSTAN_POLICY: JSON.stringify({ version: 1, twoKey: { destructive: false } }),
    },
    log: (line) => log.push(line),
  }));
  token = stack.issuer.tokens.operator!;
}, 60_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  callApi(stack.restUrl, token, method, path, body, headers);

async function run(name: string, steps: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) {
  const registered = await api('POST', '/runbooks', {
    name,
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps,
    ...extra,
  });
  expect(registered.status).toBeLessThan(300);
  const created = await api('POST', '/runs', { runbookId: name }, { 'idempotency-key': crypto.randomUUID() });
  expect(created.status).toBe(202);
  const runId = String(created.body.runId);
  const detail = await until(
    `run ${runId} to end`,
    async () => {
      const { body } = await api('GET', `/runs/${runId}`);
      return ['succeeded', 'failed', 'cancelled'].includes(String(body.status)) ? body : undefined;
    },
    90_000,
    () => log.slice(-20).join('\n'),
  );
  return { runId, detail };
}

/** The whole event log of a run, page by page. */
async function allEvents(runId: string): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for (;;) {
    const since = events.at(-1)?.seq ?? 0;
    const { status, body } = await api('GET', `/runs/${runId}/events?since=${since}&limit=1000`);
    expect(status).toBe(200);
    const page = body.events as RunEvent[];
    if (page.length === 0) return events;
    events.push(...page);
  }
}

const echo = (message: string) => ({ backend: 'test', action: 'echo', params: { message } });

describe('step output', () => {
  it('keeps every line of a 10,000-line burst up to the cap, in order, then the truncation marker', async () => {
    const { runId, detail } = await run('burst', [
      { id: 'burst', backend: 'script', action: 'run', params: { script: 'print-lines', args: ['10000'] } },
    ]);
    expect(detail.status).toBe('succeeded');
    const events = await allEvents(runId);
    expect(verifyChain(events)).toMatchObject({ valid: true });
    const output = events.filter((e) => e.type === 'step.output');
    const texts = output.map((e) => String(e.payload.text));
    const marker = texts.pop();
    expect(marker).toBe(`[output truncated after ${OUTPUT_CAP_BYTES} bytes]`);
    // "line 00001" is 10 bytes: as many whole lines as the cap holds, none missing, none reordered.
    const kept = Math.floor(OUTPUT_CAP_BYTES / 10);
    expect(texts).toEqual(Array.from({ length: kept }, (_, i) => `line ${String(i + 1).padStart(5, '0')}`));
    expect(output.map((e) => e.payload.streamSeq)).toEqual(Array.from({ length: kept + 1 }, (_, i) => i + 1));
  }, 120_000);
});

describe('rollback and conditions', () => {
  it("runs a failed step's own rollback, then the earlier steps' rollbacks, and fails with the step's error", async () => {
    const { runId, detail } = await run('own-rollback', [
      { id: 'prepare', ...echo('prepare'), rollback: echo('undo prepare') },
      {
        id: 'restart',
        backend: 'test',
        action: 'fail',
        params: { message: 'restart failed' },
        rollback: echo('start it again'),
      },
    ]);
    expect(detail.status).toBe('failed');
    const events = await allEvents(runId);
    const rollbacks = events
      .filter((e) => e.type === 'step.succeeded' && e.payload.kind === 'rollback')
      .map((e) => e.stepId);
    expect(rollbacks).toEqual(['restart', 'prepare']);
    expect(events.find((e) => e.type === 'rollback.completed')?.payload).toEqual({ steps: ['restart', 'prepare'] });
    expect(events.find((e) => e.type === 'run.failed')?.payload).toMatchObject({
      error: { code: 'STEP_FAILED', message: expect.stringContaining('restart failed') },
    });
  }, 60_000);

  it('runs an always step under fail-fast after the failure and still ends the run failed', async () => {
    const { runId, detail } = await run(
      'always-after-failure',
      [
        { id: 'break', backend: 'test', action: 'fail', params: { message: 'boom' } },
        { id: 'skipped', ...echo('only on success') },
        { id: 'announce', ...echo('finished'), condition: 'always' },
      ],
      { strategy: 'fail-fast' },
    );
    expect(detail.status).toBe('failed');
    const events = await allEvents(runId);
    const started = events.filter((e) => e.type === 'step.started').map((e) => e.stepId);
    expect(started).toEqual(['break', 'announce']);
    expect(events.find((e) => e.type === 'run.failed')?.payload).toMatchObject({
      error: { message: expect.stringContaining("'break'") },
    });
  }, 60_000);
});

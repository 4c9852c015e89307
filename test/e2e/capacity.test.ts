import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

/** Steps in the burst; `CAPSTAN_BURST_STEPS` makes a longer measurement of the same scenario. */
const BURST = Number(process.env.CAPSTAN_BURST_STEPS ?? 200);
const MAX_WORKERS = 3;
const IDLE_PROFILES = { minWorkers: 0, maxWorkers: 1 };

let stack: LocalStack;
let home: string | undefined;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('capacity', {
    workers: { 'dev-flex': 1, 'prod-critical': 0, 'prod-standard': 0, 'staging-standard': 0 },
    reconcileIntervalMs: 3_600_000,
    autoscale: { intervalMs: 500 },
    env: {
      CAPSTAN_CAPACITY: JSON.stringify({
        'dev-flex': { minWorkers: 1, maxWorkers: MAX_WORKERS, backlogPerWorker: 10, maxBacklog: 10_000 },
        'prod-critical': IDLE_PROFILES,
        'prod-standard': IDLE_PROFILES,
        'staging-standard': IDLE_PROFILES,
      }),
    },
    log: (line) => log.push(line),
  }));
}, 60_000);

afterAll(() => stopTestStack(stack, home));

const api = (method: string, path: string, body?: unknown) =>
  callApi(stack.restUrl, stack.issuer.tokens.operator ?? '', method, path, body);

/** Every succeeded run's id, page by page. */
async function succeeded(): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await api(
      'GET',
      `/runs?status=succeeded&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    ids.push(...(page.body.runs as Array<{ runId: string }>).map((r) => r.runId));
    cursor = typeof page.body.nextCursor === 'string' ? page.body.nextCursor : undefined;
  } while (cursor);
  return ids;
}

describe('worker capacity on the local stack', () => {
  it('grows the pool toward its maximum under a burst of queued steps and shrinks it back when idle', async () => {
    const doc = {
      name: 'cap-burst',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'only', backend: 'test', action: 'sleep', params: { ms: 50 } }],
    };
    expect((await api('POST', '/runbooks', doc)).status).toBeLessThan(300);
    const started = Date.now();
    const runIds: string[] = [];
    // Created in waves of 20, so the burst is the queue's, not the gateway's.
    for (let wave = 0; wave < BURST; wave += 20) {
      const created = await Promise.all(
        Array.from({ length: Math.min(20, BURST - wave) }, () => api('POST', '/runs', { runbookId: 'cap-burst' })),
      );
      for (const response of created) {
        expect(response.status).toBe(202);
        runIds.push(String(response.body.runId));
      }
    }
    const grown = await until(
      'the pool to grow',
      async () => (stack.workers.size('dev-flex') > 1 ? stack.workers.size('dev-flex') : undefined),
      60_000,
      () => log.slice(-20).join('\n'),
    );
    await until(
      `${BURST} runs to succeed`,
      async () => {
        const done = (await succeeded()).filter((id) => runIds.includes(id));
        return done.length === BURST ? true : undefined;
      },
      240_000,
      () => log.slice(-20).join('\n'),
    );
    const drainedAt = Date.now();
    await until(
      'the pool to shrink back to its minimum',
      // Every worker the scale-in stopped has drained and exited, not only the first.
      async () =>
        stack.workers.size('dev-flex') === 1 &&
        stack.workers.draining('dev-flex') === 0 &&
        stack.workers.drained.length > 0
          ? true
          : undefined,
      60_000,
      () => log.slice(-20).join('\n'),
    );
    const samples = (stack.scaler?.samples ?? []).filter((s) => s.profile === 'dev-flex' && s.at >= started);
    const peak = Math.max(...samples.map((s) => s.size));
    const peakBacklog = Math.max(...samples.map((s) => s.backlog));
    const sizes = samples
      .filter((s, i, all) => i === 0 || s.size !== all[i - 1]?.size)
      .map((s) => `${((s.at - started) / 1000).toFixed(1)}s:${s.size}`);
    const drains = stack.workers.drained.map((d) => d.ms);
    console.log(
      `burst of ${BURST} steps: peak backlog ${peakBacklog}, pool ${sizes.join(' ')}, ` +
        `all succeeded after ${((drainedAt - started) / 1000).toFixed(1)} s, ` +
        `back to 1 after ${((Date.now() - started) / 1000).toFixed(1)} s, drain times ${drains.join(', ')} ms`,
    );
    expect(grown).toBeGreaterThan(1);
    expect(peak).toBe(MAX_WORKERS);
    expect(samples.every((s) => s.size <= MAX_WORKERS)).toBe(true);
    // Each worker a scale-in stopped drained and exited on its own, well inside the stop timeout.
    expect(stack.workers.drained.length).toBe(MAX_WORKERS - 1);
    expect(Math.max(...drains)).toBeLessThan(10_000);
  }, 400_000);
});

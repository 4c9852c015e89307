import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

/**
 * The default configuration: 15 s heartbeat, 30 s lease, a reconciler sweep every 60 s. A lease
 * taken when the step started lapses 30 s later, and a sweep finds it up to 60 s after that, so a
 * next attempt within seconds of the kill can only come from the supervisor seeing the death.
 */
let stack: LocalStack;
let home: string;
let token: string;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('death', {
    workers: { 'dev-flex': 2 },
    reconcileIntervalMs: 60_000,
    env: { POWERTOOLS_LOG_LEVEL: 'INFO' },
    log: (line) => log.push(line),
  }));
  token = stack.issuer.tokens.operator ?? '';
}, 60_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const api = (method: string, path: string, body?: unknown) => callApi(stack.restUrl, token, method, path, body);
const until = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000) =>
  waitUntil(what, probe, timeoutMs, () => log.slice(-30).join('\n'));
const events = async (runId: string) =>
  (await api('GET', `/runs/${runId}/events?limit=1000`)).body.events as RunEvent[];

describe('a worker killed mid-step with the default intervals', () => {
  it('gives the step its next attempt at once, from the death its supervisor saw, not the lease lapsing', async () => {
    const registered = await api('POST', '/runbooks', {
      name: 'death-mid-step',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'nap', backend: 'test', action: 'sleep', params: { ms: 3000 }, retries: 1 }],
    });
    expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
    await until('two idle workers', async () => {
      const listed = (await api('GET', '/workers')).body.workers as Array<{ status: string }>;
      return listed.filter((w) => w.status === 'idle').length >= 2 ? true : undefined;
    });
    const created = await api('POST', '/runs', { runbookId: 'death-mid-step' });
    expect(created.status).toBe(202);
    const runId = String(created.body.runId);
    const started = await until('the step to start', async () =>
      (await events(runId)).find((e) => e.type === 'step.started'),
    );
    const victim = ((await api('GET', '/workers')).body.workers as Array<{ workerId: string; pid: number }>).find(
      (w) => w.workerId === started.meta.workerId,
    );
    expect(victim).toBeDefined();
    const killedAt = Date.now();
    process.kill(victim?.pid ?? 0, 'SIGKILL');

    const restarted = await until(
      'the next attempt to start',
      async () => (await events(runId)).filter((e) => e.type === 'step.started')[1],
    );
    const log = await events(runId);
    const lost = log.find((e) => e.type === 'step.failed');
    expect(lost?.payload).toMatchObject({
      outcome: 'expired',
      error: { code: 'LEASE_EXPIRED', message: expect.stringMatching(/died \(exited with SIGKILL\)/) },
    });
    expect(restarted.meta.workerId).not.toBe(victim?.workerId);
    // The lease would have lapsed no sooner than 15 s after the kill (30 s from the step's start).
    expect(Date.parse(restarted.timestamp) - killedAt).toBeLessThan(10_000);
    const workers = (await api('GET', '/workers')).body.workers as Array<{ workerId: string; status: string }>;
    expect(workers.find((w) => w.workerId === victim?.workerId)?.status).toBe('dead');
  }, 90_000);
});

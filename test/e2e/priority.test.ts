import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

const LOW_RUNS = 8;

let stack: LocalStack;
let home: string | undefined;
const log: string[] = [];

beforeAll(async () => {
  // One worker, so commands wait in the profile's queues and the order it takes them shows.
  ({ stack, home } = await startTestStack('priority', {
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    log: (line) => log.push(line),
  }));
}, 60_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const api = (method: string, path: string, body?: unknown) =>
  callApi(stack.restUrl, stack.issuer.tokens.operator ?? '', method, path, body);

const startedAt = async (runId: string): Promise<string> => {
  const { body } = await api('GET', `/runs/${runId}/events?limit=100`);
  const started = (body.events as RunEvent[]).find((e) => e.type === 'step.started');
  if (!started) throw new Error(`run ${runId} has no step.started`);
  return started.timestamp;
};

describe('priority in the step queue', () => {
  it("starts a high-priority run's step before a low-priority backlog already queued ahead of it", async () => {
    const doc = {
      name: 'prio-slow',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'only', backend: 'test', action: 'sleep', params: { ms: 1000 } }],
    };
    expect((await api('POST', '/runbooks', doc)).status).toBeLessThan(300);
    const low: string[] = [];
    for (let i = 0; i < LOW_RUNS; i++) {
      const { status, body } = await api('POST', '/runs', { runbookId: 'prio-slow', priority: 'low' });
      expect(status, JSON.stringify(body)).toBe(202);
      low.push(String(body.runId));
    }
    // Every low run's command is sent before the high run exists.
    await until(
      'every low run to be dispatched',
      async () => {
        const dispatched = await Promise.all(
          low.map(async (id) => {
            const { body } = await api('GET', `/runs/${id}/events?limit=100`);
            return (body.events as RunEvent[]).some((e) => e.type === 'step.dispatched');
          }),
        );
        return dispatched.every(Boolean) ? true : undefined;
      },
      60_000,
      () => log.slice(-20).join('\n'),
    );
    const { body } = await api('POST', '/runs', { runbookId: 'prio-slow', priority: 'high' });
    const high = String(body.runId);

    await until(
      'every run to succeed',
      async () => {
        const statuses = await Promise.all(
          [...low, high].map(async (id) => String((await api('GET', `/runs/${id}`)).body.status)),
        );
        if (statuses.some((s) => s === 'failed' || s === 'cancelled')) throw new Error(`a run ended: ${statuses}`);
        return statuses.every((s) => s === 'succeeded') ? true : undefined;
      },
      90_000,
      () => log.slice(-20).join('\n'),
    );
    const highStarted = await startedAt(high);
    const lowStarted = await Promise.all(low.map(startedAt));
    const lowAfter = lowStarted.filter((at) => at > highStarted).length;
    // The worker was on one low step (or about to take one) when the high run came: at most one or
    // two low steps may start before it, never the backlog.
    expect(lowAfter, `low steps started ${JSON.stringify(lowStarted)}, high ${highStarted}`).toBeGreaterThanOrEqual(
      LOW_RUNS / 2,
    );
  });
});

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { stackClient } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

const SLOTS = 3;
const SECRET_VALUE = 'sk-live-slots-5c0e8a91d7';
const ROOT = join(import.meta.dirname, '..', '..');

let stack: LocalStack;
let home: string | undefined;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('worker-slots', {
    // One dev-flex worker that runs three steps at once.
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 1000,
    env: {
      CAPSTAN_CAPACITY: JSON.stringify({ 'dev-flex': { stepsPerWorker: SLOTS } }),
      CAPSTAN_WORKER_HEARTBEAT_SECONDS: '1',
      CAPSTAN_SCRIPTS_DIR: join(ROOT, 'test', 'fixtures', 'scripts'),
      POWERTOOLS_LOG_LEVEL: 'INFO',
      // A script step is destructive: this deployment lets it run in dev without the two-key approval.
      CAPSTAN_POLICY: JSON.stringify({ version: 1, twoKey: { destructive: false } }),
    },
    log: (line) => log.push(line),
  }));
  if (home) writeFileSync(join(home, 'secrets.json'), JSON.stringify({ 'capstan/test-token': SECRET_VALUE }));
}, 60_000);

afterAll(() => stopTestStack(stack, home));

const { api, until, register, startRun, events, finished } = stackClient(() => stack, log);

const at = (event: RunEvent | undefined) => Date.parse(event?.timestamp ?? '');

describe('a worker with several slots, on the local stack', () => {
  it('runs as many steps at once as it has slots, each under its own lease, and reports busy', async () => {
    await register({
      name: 'slot-nap',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'nap', backend: 'test', action: 'sleep', params: { ms: 2500 } }],
    });
    const runIds = await Promise.all(Array.from({ length: SLOTS }, () => startRun('slot-nap')));
    const busy = await until('the worker to report busy', async () => {
      const { body } = await api('GET', '/workers');
      return (body.workers as Array<{ status: string; currentExecutionId?: string }>).find(
        (w) => w.status === 'busy' && w.currentExecutionId,
      );
    });
    expect(busy.currentExecutionId).toMatch(/^run-/);
    for (const runId of runIds) expect((await finished(runId)).status).toBe('succeeded');
    const logs = await Promise.all(runIds.map(events));
    const starts = logs.map((l) => at(l.find((e) => e.type === 'step.started')));
    const ends = logs.map((l) => at(l.find((e) => e.type === 'step.succeeded')));
    // One worker, yet every step started before any of them ended: they ran side by side.
    expect(Math.max(...starts)).toBeLessThan(Math.min(...ends));
    expect(new Set(logs.map((l) => l.find((e) => e.type === 'step.started')?.meta.workerId)).size).toBe(1);
  }, 60_000);

  it("keeps each step's secret out of events and logs while other steps run beside it", async () => {
    await register({
      name: 'slot-secret',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        {
          id: 'leak',
          backend: 'script',
          action: 'run',
          params: { script: 'print-secret' },
          secrets: ['capstan/test-token'],
        },
      ],
    });
    await register({
      name: 'slot-plain',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'nap', backend: 'test', action: 'sleep', params: { ms: 1000 } }],
    });
    const runIds = await Promise.all([startRun('slot-plain'), startRun('slot-secret'), startRun('slot-secret')]);
    for (const runId of runIds) expect((await finished(runId)).status).toBe('succeeded');
    const all = await Promise.all(runIds.map(events));
    expect(JSON.stringify(all)).toContain('token is [REDACTED]');
    expect(JSON.stringify(all)).not.toContain(SECRET_VALUE);
    expect(log.join('\n')).not.toContain(SECRET_VALUE);
  }, 60_000);
});

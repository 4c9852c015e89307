import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, LOCAL_NAMES, startLocalStack } from '../../local/stack.js';
import { makeCounters } from '../../shared/adapters/dynamodb/counters.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { startRelayedWorker } from '../support/relayed-worker.js';
import { stackClient } from '../support/stack-api.js';
import { makeScriptBackend } from '../../worker-container/backends/script.js';

const SECRET_VALUE = 'sk-live-7f3a9c1e5b2d4f60';
const ROOT = join(import.meta.dirname, '..', '..');

let stack: LocalStack;
let home: string;
const log: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-workers-'));
  writeFileSync(join(home, 'secrets.json'), JSON.stringify({ 'capstan/test-token': SECRET_VALUE }));
  stack = await startLocalStack({
    port: await freePortBlock(),
    stateDir: home,
    fresh: true,
    workers: { 'dev-flex': 2 },
    reconcileIntervalMs: 1000,
    env: {
      CAPSTAN_WORKER_HEARTBEAT_SECONDS: '1',
      CAPSTAN_SCRIPTS_DIR: join(ROOT, 'test', 'fixtures', 'scripts'),
      POWERTOOLS_LOG_LEVEL: 'INFO',
      // These tests are about the script sandbox, not its gate: this deployment's policy lets a
      // destructive action in dev run without the two-key approval (test/e2e/approvals.test.ts has it).
      CAPSTAN_POLICY: JSON.stringify({ version: 1, twoKey: { destructive: false } }),
    },
    log: (line) => log.push(line),
  });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

const { api, until, register, startRun, events, finished } = stackClient(() => stack, log);

type WorkerView = { workerId: string; pid: number; status: string; sandboxProfile: string; backends: object };

async function workers(): Promise<WorkerView[]> {
  return (await api('GET', '/workers')).body.workers as WorkerView[];
}

/** The worker that started `stepId` of the run, once it has. */
async function workerRunning(runId: string, stepId: string): Promise<WorkerView> {
  const started = await until(`${stepId} to start`, async () =>
    (await events(runId)).find((e) => e.type === 'step.started' && e.stepId === stepId),
  );
  const worker = (await workers()).find((w) => w.workerId === started.meta.workerId);
  expect(worker).toBeDefined();
  return worker!;
}

const devRunbook = (name: string, steps: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({
  name,
  environment: 'dev',
  sandbox_profile: 'dev-flex',
  steps,
  ...extra,
});

describe('workers on the local stack', () => {
  it('registers every worker and lists it with its capabilities and a live status', async () => {
    const listed = await until('two idle workers', async () => {
      const all = (await workers()).filter((w) => w.status === 'idle');
      return all.length >= 2 ? all : undefined;
    });
    for (const worker of listed) {
      expect(worker.sandboxProfile).toBe('dev-flex');
      expect(Object.keys(worker.backends)).toEqual(expect.arrayContaining(['test', 'http', 'script', 'aws', 'notify']));
      expect(worker.pid).toBeGreaterThan(0);
    }
    expect((await api('GET', '/workers?status=sleepy')).status).toBe(400);
  });

  it('recovers a step from a worker killed with SIGKILL, on another worker, without counting twice', async () => {
    const key = `kill-${crypto.randomUUID()}`;
    await register(
      devRunbook('kill-mid-step', [
        { id: 'count', backend: 'test', action: 'counter', params: { key } },
        { id: 'nap', backend: 'test', action: 'sleep', params: { ms: 4000 }, retries: 1 },
      ]),
    );
    const runId = await startRun('kill-mid-step');
    const victim = await workerRunning(runId, 'nap');
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');

    const run = await finished(runId, 60_000);
    expect(run.status).toBe('succeeded');
    const log = await events(runId);
    const lost = log.find((e) => e.type === 'step.failed' && e.stepId === 'nap');
    expect(lost?.payload).toMatchObject({ outcome: 'expired', error: { code: 'LEASE_EXPIRED', retryable: true } });
    const starts = log.filter((e) => e.type === 'step.started' && e.stepId === 'nap');
    expect(starts).toHaveLength(2);
    expect(starts[1]?.meta.workerId).not.toBe(victim.workerId);
    expect(Date.parse(starts[1]!.timestamp) - killedAt).toBeLessThan(30_000);
    const counters = makeCounters(
      DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: stack.endpoints.DYNAMODB })),
      LOCAL_NAMES.tables.state,
    );
    expect(await counters.read(key)).toBe(1);
    await until('the killed worker to be declared dead', async () =>
      (await workers()).find((w) => w.workerId === victim.workerId && w.status === 'dead'),
    );
  }, 90_000);

  it('lets a worker given SIGTERM mid-step finish the step, deregister and exit 0', async () => {
    await register(
      devRunbook('drain-mid-step', [{ id: 'nap', backend: 'test', action: 'sleep', params: { ms: 2500 } }]),
    );
    const runId = await startRun('drain-mid-step');
    const worker = await workerRunning(runId, 'nap');
    process.kill(worker.pid, 'SIGTERM');
    const run = await finished(runId);
    expect(run.status).toBe('succeeded');
    expect((await events(runId)).filter((e) => e.type === 'step.started')).toHaveLength(1);
    await until('the drained worker to deregister', async () =>
      (await workers()).find((w) => w.workerId === worker.workerId && w.status === 'deregistered'),
    );
    await until('its exit to be logged', async () =>
      log.find((line) => line.includes('exited (code 0)')) ? true : undefined,
    );
  }, 60_000);

  it('drains a worker on request through the API', async () => {
    const target = await until('an idle worker', async () => (await workers()).find((w) => w.status === 'idle'));
    const viewer = stack.issuer.tokens.viewer;
    if (viewer) expect((await api('POST', `/workers/${target.workerId}/drain`, undefined, viewer)).status).toBe(403);
    const reply = await api('POST', `/workers/${target.workerId}/drain`);
    expect(reply.status).toBe(202);
    await until('the worker to deregister', async () =>
      (await workers()).find((w) => w.workerId === target.workerId && w.status === 'deregistered'),
    );
    expect((await api('POST', '/workers/no-such-worker/drain')).status).toBe(404);
  }, 60_000);

  it('passes a script argument as one literal argv element, never through a shell', async () => {
    await register(
      devRunbook('argv', [
        {
          id: 'echo',
          backend: 'script',
          action: 'run',
          params: { script: 'echo-args', args: ['; rm -rf / #', '$(whoami)', 'two words'] },
        },
      ]),
    );
    const runId = await startRun('argv');
    const run = await finished(runId);
    expect(run.status).toBe('succeeded');
    const lines = (await events(runId)).filter((e) => e.type === 'step.output').map((e) => e.payload.text);
    expect(lines).toEqual(['; rm -rf / #', '$(whoami)', 'two words']);
  }, 60_000);

  it('refuses a step its sandbox profile does not allow at dispatch, with a violation event', async () => {
    await register({
      name: 'prod-script',
      environment: 'prod',
      sandbox_profile: 'prod-critical',
      steps: [
        {
          id: 'sneaky',
          backend: 'script',
          action: 'run',
          params: { script: 'echo-args', args: ['hi'] },
          rollback: { backend: 'test', action: 'echo', params: { message: 'undo' } },
        },
      ],
    });
    const runId = await startRun('prod-script');
    const run = await finished(runId);
    expect(run.status).toBe('failed');
    const log = await events(runId);
    const violation = log.find((e) => e.type === 'sandbox.violation');
    expect(violation?.payload).toMatchObject({ enforcedBy: 'dispatcher', backend: 'script', action: 'run' });
    expect(log.some((e) => e.type === 'step.started')).toBe(false);
  }, 60_000);

  it('refuses it again at a worker whose profile does not allow it (fail closed)', async () => {
    // Commands for staging go to a worker of the prod-critical profile, as a misrouted message would.
    const { stop } = await startRelayedWorker(stack, {
      from: 'staging-standard',
      profile: 'prod-critical',
      copies: 1,
      workerId: 'test-prod-critical-worker',
      backends: [makeScriptBackend({ directory: join(ROOT, 'test', 'fixtures', 'scripts') })],
    });
    try {
      await register({
        name: 'staging-script',
        environment: 'staging',
        sandbox_profile: 'staging-standard',
        steps: [{ id: 'run', backend: 'script', action: 'run', params: { script: 'echo-args', args: ['hi'] } }],
      });
      const runId = await startRun('staging-script');
      const run = await finished(runId);
      expect(run.status).toBe('failed');
      const log = await events(runId);
      expect(log.find((e) => e.type === 'sandbox.violation')?.payload).toMatchObject({ enforcedBy: 'worker' });
      expect(log.find((e) => e.type === 'step.failed')?.payload).toMatchObject({
        error: { code: 'SANDBOX_VIOLATION', retryable: false },
      });
    } finally {
      await stop();
    }
  }, 60_000);

  it("never lets a secret's value reach events, the run detail or the logs", async () => {
    await register(
      devRunbook('leaky', [
        {
          id: 'leak',
          backend: 'script',
          action: 'run',
          params: { script: 'print-secret' },
          secrets: ['capstan/test-token'],
        },
      ]),
    );
    const runId = await startRun('leaky');
    const run = await finished(runId);
    expect(run.status).toBe('succeeded');
    const all = await events(runId);
    expect(all.filter((e) => e.type === 'step.output').map((e) => e.payload.text)).toEqual([
      'token is [REDACTED]',
      'done',
    ]);
    expect(JSON.stringify(all)).not.toContain(SECRET_VALUE);
    expect(JSON.stringify(run)).not.toContain(SECRET_VALUE);
    expect(JSON.stringify(run)).toContain('capstan/test-token');
    expect(log.join('\n')).not.toContain(SECRET_VALUE);
  }, 60_000);
});

import { beforeEach, describe, expect, it } from 'vitest';
import { makeDashboardMetrics, type QueueDepths } from '../../../shared/app/dashboard.js';
import { makePlanNext } from '../../../shared/app/plan.js';
import type { ApprovalStore } from '../../../shared/app/ports/approvals.js';
import {
  type FakeClock,
  makeFakeClock,
  makeInMemoryRunbooks,
  makeInMemoryWorkers,
  makeRecordingCallbacks,
} from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import type { RunbookStore, WorkerStore } from '../../../shared/app/ports.js';
import { makeRegisterRunbook } from '../../../shared/app/runbooks.js';
import { createRunBodySchema, makeCreateRun } from '../../../shared/app/runs.js';
import type { Principal } from '../../../shared/domain/entities.js';
import { DEFAULT_POLICY } from '../../../shared/domain/policy.js';

const HEARTBEAT_MS = 5_000;
const platform: Principal = { subject: 'pat', tenantId: 'platform', roles: ['viewer'] };
const acme: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };
const globex: Principal = { subject: 'gus', tenantId: 'globex', roles: ['viewer'] };

let clock: FakeClock;
let runs: RunStore;
let approvals: ApprovalStore;
let runbooks: RunbookStore;
let workers: WorkerStore;
const queues: QueueDepths = { depths: async () => new Map([['dev-flex', 7]]) };

beforeEach(() => {
  clock = makeFakeClock();
  ({ runs, approvals } = makeInMemoryStores());
  runbooks = makeInMemoryRunbooks();
  workers = makeInMemoryWorkers();
});

const metrics = (runWindow?: number) =>
  makeDashboardMetrics({
    runs,
    approvals,
    workers,
    queues,
    clock,
    heartbeatMs: HEARTBEAT_MS,
    platformTenant: 'platform',
    runWindow,
  });

async function register(principal: Principal, name: string, steps: unknown[]) {
  await makeRegisterRunbook({ runbooks, clock })({
    principal,
    format: 'json',
    source: JSON.stringify({ name, environment: 'dev', sandbox_profile: 'dev-flex', steps }),
  });
}

async function start(principal: Principal, runbookId: string): Promise<string> {
  const create = makeCreateRun({ runbooks, runs, clock, starter: { start: async (run) => `arn:${run.runId}` } });
  const { runId } = await create({ principal, body: createRunBodySchema.parse({ runbookId }) });
  return runId;
}

describe('the dashboard figures', () => {
  it("counts the caller's runs by status and nobody else's", async () => {
    await register(acme, 'echo', [{ id: 'one', backend: 'test', action: 'echo', params: { message: 'hi' } }]);
    await start(acme, 'echo');
    await start(acme, 'echo');
    const figures = await metrics()(acme);
    const total = Object.values(figures.runs.byStatus).reduce((a, b) => a + b, 0);
    expect(total).toBe(2);
    expect(figures.runs).toMatchObject({ counted: 2, complete: true });
    expect(figures.queues).toBeUndefined();
    expect(figures.workers).toBeUndefined();
    const other = await metrics()(globex);
    expect(Object.values(other.runs.byStatus).every((n) => n === 0)).toBe(true);
    expect(other.approvals).toEqual({ waiting: 0, oldestWaitingSeconds: null });
  });

  it('reads no more than its window of runs and says the count is incomplete', async () => {
    await register(acme, 'echo', [{ id: 'one', backend: 'test', action: 'echo', params: { message: 'hi' } }]);
    for (let i = 0; i < 3; i++) await start(acme, 'echo');
    expect((await metrics(2)(acme)).runs).toMatchObject({ counted: 2, complete: false });
  });

  it('counts the open gates of waiting runs and the age of the oldest', async () => {
    await register(acme, 'risky', [
      { id: 'drop', backend: 'test', action: 'echo', params: { message: 'x' }, blast_radius: 'high' },
    ]);
    const runId = await start(acme, 'risky');
    const decision = await makePlanNext({
      runbooks,
      runs,
      approvals,
      clock,
      callbacks: makeRecordingCallbacks(),
      policy: DEFAULT_POLICY,
    })(runId);
    expect(decision.action).toBe('await_approval');
    clock.advance(90_000);
    const figures = await metrics()(acme);
    expect(figures.runs.byStatus.waiting_for_approval).toBe(1);
    expect(figures.approvals).toEqual({ waiting: 1, oldestWaitingSeconds: 90 });
  });

  it('shows the platform tenant the queue depths and the workers by status as of now', async () => {
    const at = clock.now().toISOString();
    const worker = {
      hostname: 'h',
      pid: 1,
      sandboxProfile: 'dev-flex' as const,
      environment: 'dev' as const,
      backends: {},
      groups: [],
      version: 'test',
      status: 'idle' as const,
      registeredAt: at,
      lastHeartbeatAt: at,
      stats: { cpuPercent: 0, rssBytes: 0, tasksCompleted: 0 },
    };
    await workers.register({ ...worker, workerId: 'w1' });
    clock.advance(4 * HEARTBEAT_MS);
    await workers.register({ ...worker, workerId: 'w2', lastHeartbeatAt: clock.now().toISOString() });
    const figures = await metrics()(platform);
    expect(figures.queues).toEqual({ 'dev-flex': 7 });
    expect(figures.workers).toMatchObject({ idle: 1, offline: 1, busy: 0 });
  });
});

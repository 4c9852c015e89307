import { describe, expect, it } from 'vitest';
import type { WorkerStore } from '../../../shared/app/ports.js';
import { makeWorkerDied } from '../../../shared/app/worker-deaths.js';
import type { StepExecution, Worker } from '../../../shared/domain/entities.js';

const now = new Date('2026-11-21T10:00:00.000Z');

const worker = (workerId: string, more: Partial<Worker>): Worker => ({
  workerId,
  hostname: 'host',
  pid: 1,
  sandboxProfile: 'dev-flex',
  environment: 'dev',
  backends: {},
  groups: [],
  version: 'test',
  status: 'busy',
  registeredAt: now.toISOString(),
  lastHeartbeatAt: now.toISOString(),
  stats: { cpuPercent: 0, rssBytes: 0, tasksCompleted: 0 },
  ...more,
});

const execution = (executionId: string, leaseOwner: string): StepExecution => ({
  executionId,
  runId: 'run-1',
  tenantId: 'acme',
  stepId: 'nap',
  kind: 'step',
  targetId: 'once',
  attempt: 1,
  status: 'running',
  idempotencyKey: executionId,
  createdAt: now.toISOString(),
  leaseOwner,
  leaseExpiresAt: new Date(now.getTime() + 30_000).toISOString(),
  outputTail: [],
  secretsUsed: [],
});

function setUp(registered: Worker[]) {
  const executions = [execution('run-1.a', 'w-task'), execution('run-1.b', 'w-other'), execution('run-1.c', 'w-pid')];
  const statuses: Array<[string, string]> = [];
  const revoked: Array<[string, string]> = [];
  const recovered: Array<{ executionId: string; leaseExpiresAt?: string; died?: string; action?: string }> = [];
  const workers: WorkerStore = {
    register: async () => undefined,
    heartbeat: async () => ({ accepted: true, drainRequested: false }),
    setStatus: async (id, status) => {
      statuses.push([id, status]);
      return true;
    },
    clearCurrent: async () => true,
    requestDrain: async () => true,
    list: async () => registered.map((w) => ({ ...w, drainRequested: false })),
  };
  const workerDied = makeWorkerDied({
    workers,
    runs: {
      expiredLeases: async () => executions.map(({ runId, executionId }) => ({ runId, executionId })),
      execution: async (_runId, id) => executions.find((e) => e.executionId === id),
      renewLease: async (_runId, id, owner, until) => {
        revoked.push([id, until.toISOString()]);
        return executions.some((e) => e.executionId === id && e.leaseOwner === owner);
      },
      load: async () => ({ run: { tenantId: 'acme', runbookId: 'rb', runbookVersion: 1 } }),
    },
    runbooks: {
      get: async (tenantId, runbookId, version) => ({
        tenantId,
        runbookId,
        version,
        digest: 'd',
        createdAt: now.toISOString(),
        createdBy: 'olive',
        definition: {
          name: 'rb',
          environment: 'dev',
          sandbox_profile: 'dev-flex',
          steps: [{ id: 'nap', backend: 'test', action: 'sleep', params: { ms: 10 } }],
        },
      }),
      findByDigest: async () => undefined,
      head: async () => undefined,
      putVersion: async () => false,
      list: async () => ({ items: [] }),
    },
    recover: async (lost, body, _now, died) => {
      recovered.push({
        executionId: lost.executionId,
        ...(lost.leaseExpiresAt && { leaseExpiresAt: lost.leaseExpiresAt }),
        ...(died && { died }),
        ...(body && { action: `${body.backend}.${body.action}` }),
      });
      return { kind: 'retry', error: { code: 'LEASE_EXPIRED', message: 'died', retryable: true } };
    },
    clock: { now: () => now },
    log: () => undefined,
  });
  return { workerDied, statuses, revoked, recovered };
}

describe('a worker death the platform reports', () => {
  it('marks the worker of a stopped ECS task dead and ends only the leases it held, at once', async () => {
    const { workerDied, statuses, revoked, recovered } = setUp([
      worker('w-task', { taskArn: 'arn:aws:ecs:eu-west-1:1:task/c/abc' }),
      worker('w-other', { taskArn: 'arn:aws:ecs:eu-west-1:1:task/c/def' }),
    ]);
    const verdicts = await workerDied({ taskArn: 'arn:aws:ecs:eu-west-1:1:task/c/abc', how: 'task stopped: OOM' });
    expect(verdicts).toHaveLength(1);
    expect(statuses).toEqual([['w-task', 'dead']]);
    expect(revoked).toEqual([['run-1.a', '2026-11-21T09:59:59.999Z']]);
    expect(recovered).toEqual([
      {
        executionId: 'run-1.a',
        leaseExpiresAt: '2026-11-21T09:59:59.999Z',
        died: 'task stopped: OOM',
        action: 'test.sleep',
      },
    ]);
  });

  it('finds a local worker by its host and process id', async () => {
    const { workerDied, statuses, recovered } = setUp([worker('w-pid', { pid: 4242 }), worker('w-task', { pid: 7 })]);
    await workerDied({ hostname: 'host', pid: 4242, how: 'exited with SIGKILL' });
    expect(statuses).toEqual([['w-pid', 'dead']]);
    expect(recovered.map((r) => r.executionId)).toEqual(['run-1.c']);
  });

  it('changes nothing for a worker that drained and deregistered', async () => {
    const { workerDied, statuses, recovered } = setUp([
      worker('w-task', { taskArn: 'arn:task/abc', status: 'deregistered' }),
    ]);
    expect(await workerDied({ taskArn: 'arn:task/abc', how: 'task stopped: scaled in' })).toEqual([]);
    expect(statuses).toEqual([]);
    expect(recovered).toEqual([]);
  });
});

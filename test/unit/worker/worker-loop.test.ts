import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { StepExecution } from '../../../shared/domain/entities.js';
import type { StepCommand } from '../../../shared/domain/messages.js';
import { sleep } from '../../../worker-container/backends/types.js';
import { Worker, type WorkerOptions } from '../../../worker-container/worker.js';
import { Later } from '../../../shared/app/later.js';
import type { AgentNode } from '../../../shared/app/worker-ports.js';
import { command, fakeBackend, fakeCommandSource, fakeResults, fakeWorkerStore } from './fakes.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const execution = (executionId: string, status: StepExecution['status']): StepExecution => ({
  executionId,
  runId: 'run-1',
  tenantId: 'acme',
  stepId: 'nap',
  kind: 'step',
  targetId: 'once',
  attempt: 1,
  status,
  idempotencyKey: executionId,
  createdAt: '2026-11-21T10:00:00.000Z',
  leaseOwner: 'worker-1',
  outputTail: [],
  secretsUsed: [],
});

function worker(agent?: AgentNode, extra: Partial<WorkerOptions> = {}) {
  const commands = fakeCommandSource();
  const registry = fakeWorkerStore();
  const { results, reported } = fakeResults();
  const leases = new Map<string, string>();
  const recovered: StepCommand[] = [];
  const w = new Worker({
    workerId: 'worker-1',
    profile: 'dev-flex',
    registration: { hostname: 'host', pid: 42, environment: 'dev', backends: {}, groups: [], version: 'test' },
    workers: registry.store,
    ...(agent && { agent }),
    heartbeatMs: 15_000,
    leaseMs: 30_000,
    commands: commands.source,
    runs: {
      acquireLease: async (_runId, executionId) => {
        if (executionId.endsWith('.lost')) return { claim: 'lost', execution: execution(executionId, 'running') };
        if (leases.has(executionId)) return { claim: 'held' };
        leases.set(executionId, 'worker-1');
        return { claim: 'lease', execution: execution(executionId, 'leased') };
      },
      renewLease: async () => true,
      receipt: async () => undefined,
    },
    results,
    recover: async (_lost, cmd) => {
      recovered.push(cmd as StepCommand);
      return { kind: 'retry', error: { code: 'LEASE_EXPIRED', message: 'lost', retryable: true } };
    },
    backends: [
      fakeBackend({
        sleep: async ({ params, signal }) => {
          await sleep(Number(params.ms), signal);
          return {};
        },
      }),
    ],
    secrets: { get: () => Promise.reject(new Error('no secrets here')) },
    log: () => undefined,
    ...extra,
  });
  return { w, commands, registry, reported, recovered };
}

const nap = (executionId: string) =>
  command({ executionId, action: 'sleep', params: { ms: 10_000 }, idempotencyKey: executionId });

describe('the worker loop', () => {
  it('on drain (SIGTERM) finishes the current step, deletes its command, receives no more and deregisters', async () => {
    const { w, commands, registry, reported } = worker();
    const running = w.run();
    commands.push(nap('run-1.a'));
    await vi.advanceTimersByTimeAsync(100);
    expect(w.busy).toBe(true);

    let stopped = false;
    const stopping = w.stop().then(() => (stopped = true));
    commands.push(nap('run-1.b'));
    await vi.advanceTimersByTimeAsync(5000);
    expect(stopped).toBe(false);
    expect(registry.beats.at(-1)?.status).toBe('draining');

    await vi.advanceTimersByTimeAsync(5000);
    await stopping;
    await running;
    expect(reported.filter((r) => r.kind === 'finished')).toEqual([
      { kind: 'finished', value: { outcome: 'succeeded' } },
    ]);
    expect(reported.filter((r) => r.kind === 'started')).toHaveLength(1);
    expect(commands.deleted).toEqual(['run-1.a']);
    expect(registry.statuses).toEqual(['deregistered']);
    expect(w.completed).toBe(1);
  });

  it("takes its next command while the last one's delete is still on its way, and waits for it before deregistering", async () => {
    const failures: string[] = [];
    const later = new Later((what, error) => failures.push(`${what}: ${error.message}`));
    const { w, commands, registry, reported } = worker(undefined, { later });
    let letDeletesThrough: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (letDeletesThrough = resolve));
    const deleteNow = commands.source.delete;
    commands.source.delete = async (c) => {
      await gate;
      await deleteNow(c);
    };
    const running = w.run();
    commands.push(nap('run-1.a'));
    commands.push(nap('run-1.b'));
    await vi.advanceTimersByTimeAsync(10_100);
    // The first step ended and its delete waits; the second has started all the same.
    expect(reported.filter((r) => r.kind === 'started')).toHaveLength(2);
    expect(commands.deleted).toEqual([]);
    expect(later.size).toBe(1);

    const stopping = w.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(registry.statuses).toEqual([]);
    letDeletesThrough();
    await stopping;
    await running;
    expect(commands.deleted).toEqual(['run-1.a', 'run-1.b']);
    expect(registry.statuses).toEqual(['deregistered']);
    expect(failures).toEqual([]);
  });

  it('hands a command received while it starts draining straight back, unrun', async () => {
    const { w, commands, registry, reported } = worker();
    const running = w.run();
    await vi.advanceTimersByTimeAsync(100);
    const stopping = w.stop();
    commands.push(nap('run-1.late'));
    await stopping;
    await running;
    expect(commands.released).toEqual(['run-1.late']);
    expect(commands.deleted).toEqual([]);
    expect(reported).toEqual([]);
    expect(registry.statuses).toEqual(['deregistered']);
  });

  it('deletes a duplicate delivery without running it, and ends a lost execution by the recovery rule', async () => {
    const { w, commands, reported, recovered } = worker();
    const running = w.run();
    commands.push(nap('run-1.a'));
    await vi.advanceTimersByTimeAsync(10_100);
    commands.push(nap('run-1.a'), 'again');
    commands.push(nap('run-1.x.lost'));
    await vi.advanceTimersByTimeAsync(100);
    expect(commands.deleted).toEqual(['run-1.a', 'again', 'run-1.x.lost']);
    expect(reported.filter((r) => r.kind === 'started')).toHaveLength(1);
    expect(recovered.map((c) => c.executionId)).toEqual(['run-1.x.lost']);
    const stopping = w.stop();
    commands.idle();
    await stopping;
    await running;
  });

  it('as an agent registers its node at start, beats it with each heartbeat and deregisters it on drain', async () => {
    const calls: string[] = [];
    const agent: AgentNode = {
      register: async () => void calls.push('register'),
      beat: async () => void calls.push('beat'),
      deregister: async () => void calls.push('deregister'),
    };
    const { w, commands } = worker(agent);
    const running = w.run();
    await vi.advanceTimersByTimeAsync(100);
    expect(calls).toEqual(['register']);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(calls).toEqual(['register', 'beat']);
    const stopping = w.stop();
    commands.idle();
    await stopping;
    await running;
    expect(calls.at(-1)).toBe('deregister');
  });

  describe('with several slots', () => {
    it('runs as many steps at once as it has slots, and takes the next command when one ends', async () => {
      const { w, commands, reported } = worker(undefined, { slots: 2 });
      const running = w.run();
      for (const id of ['run-1.a', 'run-1.b', 'run-1.c']) commands.push(nap(id));
      await vi.advanceTimersByTimeAsync(100);
      expect(reported.filter((r) => r.kind === 'started')).toHaveLength(2);
      expect(w.busy).toBe(true);

      await vi.advanceTimersByTimeAsync(10_000);
      // Both ended: their commands are deleted and the third has its slot.
      expect(commands.deleted).toEqual(['run-1.a', 'run-1.b']);
      expect(reported.filter((r) => r.kind === 'started')).toHaveLength(3);

      await vi.advanceTimersByTimeAsync(10_000);
      expect(commands.deleted).toEqual(['run-1.a', 'run-1.b', 'run-1.c']);
      expect(w.completed).toBe(3);
      const stopping = w.stop();
      commands.idle();
      await stopping;
      await running;
    });

    it('on drain lets every running step finish before it deregisters', async () => {
      const { w, commands, registry, reported } = worker(undefined, { slots: 3 });
      const running = w.run();
      commands.push(nap('run-1.a'));
      commands.push(nap('run-1.b'));
      await vi.advanceTimersByTimeAsync(100);
      const stopping = w.stop();
      commands.push(nap('run-1.late'));
      await vi.advanceTimersByTimeAsync(5000);
      expect(registry.statuses).toEqual([]);
      await vi.advanceTimersByTimeAsync(5000);
      await stopping;
      await running;
      expect(reported.filter((r) => r.kind === 'finished')).toHaveLength(2);
      expect(commands.deleted).toEqual(['run-1.a', 'run-1.b']);
      expect(commands.released).toEqual(['run-1.late']);
      expect(registry.statuses).toEqual(['deregistered']);
    });

    it('on abort stops every running action and gives up every lease', async () => {
      const released: string[] = [];
      const { w, commands, reported } = worker(undefined, {
        slots: 2,
        runs: {
          acquireLease: async (_runId, executionId) => ({
            claim: 'lease',
            execution: execution(executionId, 'leased'),
          }),
          renewLease: async (_runId, executionId, _owner, until) => {
            if (until.getTime() <= Date.now()) released.push(executionId);
            return true;
          },
          receipt: async () => undefined,
        },
      });
      const running = w.run();
      commands.push(nap('run-1.a'));
      commands.push(nap('run-1.b'));
      await vi.advanceTimersByTimeAsync(100);
      await w.abort();
      await vi.advanceTimersByTimeAsync(100);
      expect(released.sort()).toEqual(['run-1.a', 'run-1.b']);
      // An aborted action records its failure; neither step ran to its end.
      expect(reported.filter((r) => r.kind === 'finished').map((r) => r.value)).toEqual([
        expect.objectContaining({ outcome: 'failed', error: expect.objectContaining({ code: 'WORKER_STOPPED' }) }),
        expect.objectContaining({ outcome: 'failed', error: expect.objectContaining({ code: 'WORKER_STOPPED' }) }),
      ]);
      const stopping = w.stop();
      commands.idle();
      await stopping;
      await running;
    });
  });
});

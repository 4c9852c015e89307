import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ActionError } from '../../../worker-container/backends/types.js';
import { Heartbeat, type WorkerActivity } from '../../../worker-container/heartbeat.js';
import { command, fakeWorkerStore } from './fakes.js';

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date('2026-11-21T10:00:00.000Z'));
});
afterEach(() => void vi.useRealTimers());

function heartbeat(
  activity: () => WorkerActivity,
  more: {
    renews?: boolean;
    /** Answers each renewal instead of `renews` (and may throw, as a failed request does). */
    renew?: (runId: string, executionId: string) => Promise<boolean>;
    reply?: { accepted: boolean; drainRequested: boolean };
  } = {},
) {
  const registry = fakeWorkerStore(more.reply);
  const renewals: Array<{ executionId: string; until: string }> = [];
  const drains: number[] = [];
  const logged: string[] = [];
  const beat = new Heartbeat({
    workerId: 'worker-1',
    profile: 'dev-flex',
    registration: { hostname: 'host', pid: 42, environment: 'dev', backends: {}, groups: [], version: 'test' },
    workers: registry.store,
    leases: {
      renewLease: async (runId, executionId, _owner, until) => {
        if (more.renew) return more.renew(runId, executionId);
        renewals.push({ executionId, until: until.toISOString() });
        return more.renews ?? true;
      },
    },
    heartbeatMs: 15_000,
    leaseMs: 30_000,
    activity,
    onDrainRequested: () => drains.push(Date.now()),
    log: (message) => logged.push(message),
  });
  return { beat, registry, renewals, drains, logged };
}

describe('the heartbeat', () => {
  it('beats every heartbeat interval, reporting idle, until it is stopped', async () => {
    const { beat, registry } = heartbeat(() => ({ receiving: true, running: [], completed: 3 }));
    beat.start();
    await vi.advanceTimersByTimeAsync(14_999);
    expect(registry.beats).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(registry.beats.map((b) => b.at)).toEqual([
      '2026-11-21T10:00:15.000Z',
      '2026-11-21T10:00:30.000Z',
      '2026-11-21T10:00:45.000Z',
    ]);
    expect(registry.beats[0]).toMatchObject({ status: 'idle', stats: { tasksCompleted: 3 } });
    beat.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(registry.beats).toHaveLength(3);
  });

  it('renews the current lease to a lease length from now with each beat, and reports busy with it', async () => {
    const current = { cmd: command(), controller: new AbortController() };
    const { beat, registry, renewals } = heartbeat(() => ({ receiving: true, running: [current], completed: 0 }));
    beat.start();
    await vi.advanceTimersByTimeAsync(30_000);
    expect(renewals).toEqual([
      { executionId: current.cmd.executionId, until: '2026-11-21T10:00:45.000Z' },
      { executionId: current.cmd.executionId, until: '2026-11-21T10:01:00.000Z' },
    ]);
    expect(registry.beats[1]).toMatchObject({ status: 'busy', currentExecutionId: current.cmd.executionId });
    expect(current.controller.signal.aborted).toBe(false);
    beat.stop();
  });

  it('stops the action when the lease could not be renewed (taken over)', async () => {
    const current = { cmd: command(), controller: new AbortController() };
    const { beat } = heartbeat(() => ({ receiving: true, running: [current], completed: 0 }), { renews: false });
    await beat.beat();
    expect(current.controller.signal.reason).toBeInstanceOf(ActionError);
    expect(current.controller.signal.reason).toMatchObject({ code: 'LEASE_LOST' });
  });

  it('renews the lease of every step it runs, stops only the one whose lease was taken over, and reports the oldest', async () => {
    const first = { cmd: command({ executionId: 'run-1.a' }), controller: new AbortController() };
    const second = { cmd: command({ executionId: 'run-2.b', runId: 'run-2' }), controller: new AbortController() };
    const running = [first, second];
    const renewed: string[] = [];
    const { beat, registry } = heartbeat(() => ({ receiving: true, running, completed: 0 }), {
      renew: async (runId, executionId) => {
        renewed.push(`${runId}/${executionId}`);
        return executionId !== 'run-2.b';
      },
    });
    await beat.beat();
    expect(renewed).toEqual(['run-1/run-1.a', 'run-2/run-2.b']);
    expect(first.controller.signal.aborted).toBe(false);
    expect(second.controller.signal.reason).toMatchObject({ code: 'LEASE_LOST' });
    expect(registry.beats[0]).toMatchObject({ status: 'busy', currentExecutionId: 'run-1.a' });
    // Once the oldest lease is taken over too, that step is only winding down: the next one is reported.
    first.controller.abort(new ActionError('LEASE_LOST', 'the lease was taken over', true));
    const third = { cmd: command({ executionId: 'run-3.c', runId: 'run-3' }), controller: new AbortController() };
    running.push(third);
    await beat.beat();
    expect(registry.beats[1]).toMatchObject({ status: 'busy', currentExecutionId: 'run-3.c' });
  });

  it('beats even when renewing one lease fails, and renews the others', async () => {
    const first = { cmd: command({ executionId: 'run-1.a' }), controller: new AbortController() };
    const second = { cmd: command({ executionId: 'run-1.b' }), controller: new AbortController() };
    const renewed: string[] = [];
    const { beat, registry, logged } = heartbeat(() => ({ receiving: true, running: [first, second], completed: 0 }), {
      renew: async (_runId, executionId) => {
        if (executionId === 'run-1.a') throw new Error('throttled');
        renewed.push(executionId);
        return true;
      },
    });
    await beat.beat();
    expect(renewed).toEqual(['run-1.b']);
    expect(logged).toEqual(['lease renewal failed']);
    expect(first.controller.signal.aborted).toBe(false);
    expect(registry.beats).toHaveLength(1);
  });

  it('registers again when its beat is refused (declared dead while alive), and reports draining when draining', async () => {
    const refused = heartbeat(() => ({ receiving: true, running: [], completed: 0 }), {
      reply: { accepted: false, drainRequested: false },
    });
    await refused.beat.beat();
    expect(refused.registry.registered).toHaveLength(1);
    expect(refused.registry.registered[0]).toMatchObject({ workerId: 'worker-1', status: 'idle', pid: 42 });

    const draining = heartbeat(() => ({ receiving: false, running: [], completed: 0 }), {
      reply: { accepted: false, drainRequested: true },
    });
    await draining.beat.beat();
    expect(draining.registry.beats[0]?.status).toBe('draining');
    expect(draining.registry.registered).toHaveLength(0);
    expect(draining.drains).toHaveLength(0);
  });

  it('passes an operator drain request on once, while receiving', async () => {
    const { beat, drains } = heartbeat(() => ({ receiving: true, running: [], completed: 0 }), {
      reply: { accepted: true, drainRequested: true },
    });
    await beat.beat();
    expect(drains).toHaveLength(1);
  });
});

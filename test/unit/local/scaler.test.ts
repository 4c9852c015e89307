import { afterEach, describe, expect, it, vi } from 'vitest';
import { makeSettableQueueDepth } from '../../../shared/app/ports/in-memory/queue-depth.js';
import type { SandboxProfileName } from '../../../shared/domain/sandbox-profiles.js';
import { startScaler } from '../../../local/scaler.js';

function fakePool(start: number) {
  const sizes = new Map<SandboxProfileName, number>([['dev-flex', start]]);
  return {
    size: (profile: SandboxProfileName) => sizes.get(profile) ?? 0,
    scale: vi.fn((profile: SandboxProfileName, count: number) => void sizes.set(profile, count)),
  };
}

afterEach(() => vi.useRealTimers());

describe('the local worker scaler', () => {
  it('moves the pool with its queue: out at once, in one worker per tick, recording each size', async () => {
    vi.useFakeTimers();
    const pool = fakePool(1);
    const depth = makeSettableQueueDepth();
    const scaler = startScaler({
      pool,
      depth,
      profiles: new Map([['dev-flex', { minWorkers: 1, maxWorkers: 3, backlogPerWorker: 10 }]]),
      intervalMs: 100,
      log: () => undefined,
    });
    depth.set('dev-flex', { visible: 150, inFlight: 3 });
    await vi.advanceTimersByTimeAsync(100);
    expect(pool.size('dev-flex')).toBe(3);
    depth.set('dev-flex', { visible: 0, inFlight: 0 });
    await vi.advanceTimersByTimeAsync(100);
    expect(pool.size('dev-flex')).toBe(2);
    await vi.advanceTimersByTimeAsync(300);
    expect(pool.size('dev-flex')).toBe(1);
    expect(pool.scale.mock.calls).toEqual([
      ['dev-flex', 3],
      ['dev-flex', 2],
      ['dev-flex', 1],
    ]);
    expect(scaler.samples.map((s) => [s.backlog, s.size]).slice(0, 2)).toEqual([
      [153, 3],
      [0, 2],
    ]);
    scaler.stop();
  });
});

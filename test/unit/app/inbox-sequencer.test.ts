import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeSequencer } from '../../../shared/app/inbox-sequencer.js';

describe("a writer's sequencing of run inboxes", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('sequences at once, then at most once more per interval, whatever the number of events', async () => {
    const calls: string[] = [];
    const sequenceSoon = makeSequencer({
      sequence: async (runId, options) => {
        calls.push(`${runId}:${String(options?.eager)}`);
      },
    });
    await sequenceSoon('run-1');
    expect(calls).toEqual(['run-1:false']);
    for (let i = 0; i < 10; i++) await sequenceSoon('run-1');
    // Another run has its own interval.
    await sequenceSoon('run-2');
    expect(calls).toEqual(['run-1:false', 'run-2:false']);
    await vi.advanceTimersByTimeAsync(250);
    expect(calls).toEqual(['run-1:false', 'run-2:false', 'run-1:false']);
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toHaveLength(3);
  });

  it('swallows a failed deferred sequencing: the next writer or the sweep takes the events', async () => {
    let fail = false;
    const sequenceSoon = makeSequencer({
      sequence: async () => {
        if (fail) throw new Error('contended');
      },
    });
    await sequenceSoon('run-1');
    fail = true;
    await sequenceSoon('run-1');
    await expect(vi.advanceTimersByTimeAsync(250)).resolves.not.toThrow();
  });
});

describe('a long-lived writer', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('forgets runs it has not sequenced for an interval, and still sequences them at once', async () => {
    const calls: string[] = [];
    const sequenceSoon = makeSequencer({ sequence: async (runId) => void calls.push(runId) });
    for (let i = 0; i < 1100; i++) await sequenceSoon(`run-${i}`);
    await vi.advanceTimersByTimeAsync(300);
    await sequenceSoon('run-new');
    await sequenceSoon('run-0');
    expect(calls.slice(-2)).toEqual(['run-new', 'run-0']);
  });
});

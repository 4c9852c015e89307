import { describe, expect, it } from 'vitest';
import { makeBackpressure } from '../../../shared/app/backpressure.js';
import { makeInMemoryRunbooks } from '../../../shared/app/ports/in-memory/fakes.js';
import { makeSettableQueueDepth } from '../../../shared/app/ports/in-memory/queue-depth.js';
import type { QueueDepth } from '../../../shared/app/ports/capacity.js';
import { aRun, aRunbookVersion } from '../../support/runs.js';

const MAX_BACKLOG = 10;

async function setup() {
  const runbooks = makeInMemoryRunbooks();
  await runbooks.putVersion(aRunbookVersion(), undefined);
  const queue = makeSettableQueueDepth();
  // Each read answers only when the test lets it, so reads can be held under way.
  const pending: Array<() => void> = [];
  const depth: QueueDepth = {
    depth: async (profile) => {
      const reading = queue.depth(profile);
      await new Promise<void>((resolve) => pending.push(resolve));
      return reading;
    },
  };
  const answer = async () => {
    for (const resolve of pending.splice(0)) resolve();
    await new Promise((resolve) => setImmediate(resolve));
  };
  const backpressure = makeBackpressure({ depth, runbooks, maxBacklog: () => MAX_BACKLOG });
  const run = (n: number) => aRun({ runId: `run-${n}` });
  return { backpressure, queue, answer, run };
}

describe('backpressure on the profile queues', () => {
  it('reads the queue once for passes that need it while a read is under way', async () => {
    const { backpressure, queue, answer, run } = await setup();
    queue.set('dev-flex', { visible: 4 });
    const first = backpressure.pass().backlogOf(run(1));
    const second = backpressure.pass().backlogOf(run(2));
    await new Promise((resolve) => setImmediate(resolve));
    await answer();
    expect(queue.reads).toBe(1);
    expect(await first).toEqual({ profile: 'dev-flex', depth: 4, max: MAX_BACKLOG });
    expect(await second).toEqual({ profile: 'dev-flex', depth: 4, max: MAX_BACKLOG });
  });

  it('counts what each pass admits on a shared read for every pass that shares it', async () => {
    const { backpressure, queue, answer, run } = await setup();
    queue.set('dev-flex', { visible: MAX_BACKLOG - 1 });
    const one = backpressure.pass();
    const two = backpressure.pass();
    const early = one.backlogOf(run(1));
    const late = two.backlogOf(run(2));
    await new Promise((resolve) => setImmediate(resolve));
    await answer();
    expect((await early)?.depth).toBe(MAX_BACKLOG - 1);
    one.admitted('dev-flex');
    // The other pass's run would be the eleventh message: it sees the queue full.
    expect((await two.backlogOf(run(2)))?.depth).toBe(MAX_BACKLOG);
    expect(await two.saturated(run(3))).toBe(true);
    expect((await late)?.depth).toBe(MAX_BACKLOG - 1);
  });

  it('reads the queue again for a pass that starts once the last read has answered', async () => {
    const { backpressure, queue, answer, run } = await setup();
    const first = backpressure.pass().backlogOf(run(1));
    await new Promise((resolve) => setImmediate(resolve));
    await answer();
    expect((await first)?.depth).toBe(0);
    queue.set('dev-flex', { visible: MAX_BACKLOG });
    const second = backpressure.pass().backlogOf(run(2));
    await new Promise((resolve) => setImmediate(resolve));
    await answer();
    expect(queue.reads).toBe(2);
    expect((await second)?.depth).toBe(MAX_BACKLOG);
  });
});

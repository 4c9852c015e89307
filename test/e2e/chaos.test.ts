import { afterAll, describe, expect, it } from 'vitest';
import { runChaos } from '../../bench/scenarios/chaos.js';
import { cleanUp } from '../../bench/support.js';

afterAll(() => cleanUp());

describe('the chaos suite, short', () => {
  it('keeps every effect at most once while workers are killed, and leaves every run ended or safely paused', async () => {
    const lines: string[] = [];
    const figures = await runChaos(
      { runs: 6, workers: 2, inFlight: 3, killEveryMs: 2000, maxKills: 2, targetedCrashes: 1, deadlineMs: 80_000 },
      (line) => lines.push(line),
    );

    const context = lines.join('\n');
    expect(figures.runs, context).toBe(6);
    expect(figures.targetedCrashes, context).toBe(1);
    expect(figures.randomKills, context).toBe(2);
    expect(figures.doubleEffects, context).toBe(0);
    expect(figures.brokenChains, context).toBe(0);
    expect(figures.lostEffects, context).toBe(0);
    expect(figures.unfinished, context).toBe(0);
    // The targeted crash happened after the effect: that run paused for an operator, who ended it.
    expect(figures.pausedSafe, context).toBeGreaterThanOrEqual(1);
    expect(figures.byStatus.cancelled, context).toBeGreaterThanOrEqual(1);
  }, 100_000);
});

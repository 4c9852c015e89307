import { describe, expect, it } from 'vitest';
import { parseRunbookObject } from '../../../shared/domain/runbook.js';
import { isStuck, longestStepTimeoutMs } from '../../../shared/domain/stuck.js';

const runbook = parseRunbookObject({
  name: 'slow',
  environment: 'dev',
  sandbox_profile: 'dev-flex',
  steps: [
    { id: 'quick', backend: 'test', action: 'echo', params: { message: 'hi' }, timeout: '30s' },
    {
      id: 'slow',
      backend: 'test',
      action: 'sleep',
      params: { ms: 1 },
      timeout: '2m',
      rollback: { backend: 'test', action: 'sleep', params: { ms: 1 }, timeout: '10m' },
    },
  ],
});

const now = new Date('2026-01-01T01:00:00.000Z');
const minutesAgo = (m: number) => new Date(now.getTime() - m * 60_000);

describe('stuck runs', () => {
  it('takes the longest timeout of any step or rollback', () => {
    expect(longestStepTimeoutMs(runbook)).toBe(10 * 60_000);
  });

  it('finds a running run stuck once its last event is older than the longest timeout', () => {
    expect(isStuck('running', minutesAgo(9), runbook, now)).toBe(false);
    expect(isStuck('running', minutesAgo(11), runbook, now)).toBe(true);
    expect(isStuck('rolling_back', minutesAgo(11), runbook, now)).toBe(true);
  });

  it('never finds a run stuck that waits for a person, admission or nothing', () => {
    for (const status of ['waiting_for_approval', 'paused', 'throttled', 'succeeded'] as const)
      expect(isStuck(status, minutesAgo(600), runbook, now)).toBe(false);
  });
});

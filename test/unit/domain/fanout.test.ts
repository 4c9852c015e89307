import { describe, expect, it } from 'vitest';
import { nextRelease, pipelineNext, rateLimitsOf, wavesOf } from '../../../shared/domain/fanout.js';
import { resolveTarget, type InventoryNode } from '../../../shared/domain/inventory.js';
import { phaseSchema } from '../../../shared/domain/runbook.js';

const node = (id: string, groups: string[]): InventoryNode => ({
  id,
  tenantId: 't',
  groups,
  attributes: {},
  source: 'declared',
  status: 'online',
  lastSeen: '2026-01-01T00:00:00.000Z',
});

describe('rate control', () => {
  it('reads counts and percentages against the number of targets', () => {
    expect(rateLimitsOf({ max_concurrency: '25%', max_errors: '10%' }, 'fail-fast', 10)).toEqual({
      maxConcurrency: 3,
      ramp: false,
      haltAfter: 1,
      tolerated: 1,
    });
    expect(rateLimitsOf({ max_concurrency: 50 }, 'fail-fast', 4).maxConcurrency).toBe(4);
  });

  it('stops at the first failure under fail-fast and never under continue, tolerating none either way', () => {
    expect(rateLimitsOf({}, 'fail-fast', 8)).toMatchObject({ haltAfter: 0, tolerated: 0, maxConcurrency: 8 });
    expect(rateLimitsOf({}, 'continue', 8)).toMatchObject({ haltAfter: 8, tolerated: 0 });
  });

  it('plans waves of the limit, or of 1, 2, 4 up to it with a ramp', () => {
    expect(wavesOf(rateLimitsOf({ max_concurrency: 2 }, 'fail-fast', 5), 5)).toEqual([2, 2, 1]);
    expect(wavesOf(rateLimitsOf({ max_concurrency: 4, ramp: 'exponential' }, 'fail-fast', 12), 12)).toEqual([
      1, 2, 4, 4, 1,
    ]);
  });

  it('starts what the limit allows, nothing past the error budget, and skips the rest', () => {
    const limits = rateLimitsOf({ max_concurrency: 2, max_errors: 1 }, 'fail-fast', 6);
    expect(nextRelease(limits, { total: 6, released: 0, done: 0, failed: 0 })).toEqual({ kind: 'start', count: 2 });
    expect(nextRelease(limits, { total: 6, released: 2, done: 1, failed: 1 })).toEqual({ kind: 'start', count: 1 });
    expect(nextRelease(limits, { total: 6, released: 3, done: 2, failed: 2 })).toEqual({ kind: 'halt', skipped: 3 });
    expect(nextRelease(limits, { total: 6, released: 3, done: 1, failed: 0 }, true)).toEqual({
      kind: 'halt',
      skipped: 3,
    });
    expect(nextRelease(limits, { total: 6, released: 6, done: 3, failed: 0 })).toEqual({ kind: 'none' });
  });
});

describe('targets', () => {
  it('resolves all, a group or one node to a sorted list, empty when nothing matches', () => {
    const nodes = [node('web-2', ['web']), node('db-1', ['db']), node('web-1', ['web', 'edge'])];
    expect(resolveTarget({ all: true }, nodes).map((n) => n.id)).toEqual(['db-1', 'web-1', 'web-2']);
    expect(resolveTarget({ group: 'web' }, nodes).map((n) => n.id)).toEqual(['web-1', 'web-2']);
    expect(resolveTarget({ node: 'db-1' }, nodes).map((n) => n.id)).toEqual(['db-1']);
    expect(resolveTarget({ group: 'missing' }, nodes)).toEqual([]);
  });
});

describe('pipeline scheduling', () => {
  const phase = phaseSchema.parse({
    id: 'p',
    mode: 'pipeline',
    steps: [
      { id: 'a', backend: 'test', action: 'echo', params: { message: 'a' } },
      { id: 'b', backend: 'test', action: 'echo', params: { message: 'b' }, retries: 1 },
      { id: 'c', backend: 'test', action: 'echo', params: { message: 'c' } },
      { id: 'fix', backend: 'test', action: 'echo', params: { message: 'f' }, condition: 'on_failure' },
      { id: 'log', backend: 'test', action: 'echo', params: { message: 'l' }, condition: 'always' },
    ],
  });

  it('moves a target to its next sub-step, retries a failed one, then takes the failure path', () => {
    expect(pipelineNext(phase, { stepId: 'a', attempt: 1, succeeded: true, failedBefore: false })).toEqual({
      kind: 'run',
      stepId: 'b',
      attempt: 1,
      failedBefore: false,
    });
    expect(pipelineNext(phase, { stepId: 'b', attempt: 1, succeeded: false, failedBefore: false })).toMatchObject({
      stepId: 'b',
      attempt: 2,
    });
    expect(pipelineNext(phase, { stepId: 'b', attempt: 2, succeeded: false, failedBefore: false })).toEqual({
      kind: 'run',
      stepId: 'fix',
      attempt: 1,
      failedBefore: true,
    });
    expect(pipelineNext(phase, { stepId: 'c', attempt: 1, succeeded: true, failedBefore: false })).toMatchObject({
      stepId: 'log',
    });
    expect(pipelineNext(phase, { stepId: 'log', attempt: 1, succeeded: true, failedBefore: true })).toEqual({
      kind: 'done',
      succeeded: false,
    });
  });

  it("runs a step's own rollback on the target where it failed for good, then takes the failure path", () => {
    const undoable = phaseSchema.parse({
      id: 'p',
      mode: 'pipeline',
      steps: [
        {
          id: 'restart',
          backend: 'test',
          action: 'echo',
          params: { message: 'r' },
          rollback: { backend: 'test', action: 'echo', params: { message: 'start' } },
        },
        { id: 'verify', backend: 'test', action: 'echo', params: { message: 'v' } },
        { id: 'report', backend: 'test', action: 'echo', params: { message: 'l' }, condition: 'always' },
      ],
    });
    expect(pipelineNext(undoable, { stepId: 'restart', attempt: 1, succeeded: false, failedBefore: false })).toEqual({
      kind: 'run',
      stepId: 'restart',
      attempt: 1,
      failedBefore: true,
      rollback: true,
    });
    expect(
      pipelineNext(undoable, { kind: 'rollback', stepId: 'restart', attempt: 1, succeeded: true, failedBefore: true }),
    ).toEqual({ kind: 'run', stepId: 'report', attempt: 1, failedBefore: true });
  });

  it('does not retry an error that says it cannot be retried', () => {
    expect(
      pipelineNext(phase, { stepId: 'b', attempt: 1, succeeded: false, retryable: false, failedBefore: false }),
    ).toMatchObject({ stepId: 'fix' });
  });
});

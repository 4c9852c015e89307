import { describe, expect, it } from 'vitest';
import type { StepExecution } from '../../../shared/domain/entities.js';
import { leaseClaimOf, lostExecutionVerdict } from '../../../shared/domain/recovery.js';

const now = new Date('2026-11-21T10:00:00.000Z');
const execution = (more: Partial<StepExecution>): StepExecution => ({
  executionId: 'run-1.step.only.1.once',
  runId: 'run-1',
  tenantId: 'acme',
  stepId: 'only',
  kind: 'step',
  targetId: 'once',
  attempt: 1,
  status: 'pending',
  idempotencyKey: 'run-1.step.only.once',
  createdAt: now.toISOString(),
  outputTail: [],
  secretsUsed: [],
  ...more,
});
const lapsed = { leaseOwner: 'worker-a', leaseExpiresAt: new Date(now.getTime() - 1).toISOString() };
const live = { leaseOwner: 'worker-a', leaseExpiresAt: new Date(now.getTime() + 1000).toISOString() };

describe('leaseClaimOf', () => {
  it('leases a pending execution and one whose holder lapsed before it started', () => {
    expect(leaseClaimOf(execution({}), now)).toBe('lease');
    expect(leaseClaimOf(execution({ status: 'leased', ...lapsed }), now)).toBe('lease');
  });

  it('never takes over a started execution whose holder lapsed: it is lost', () => {
    expect(leaseClaimOf(execution({ status: 'running', ...lapsed }), now)).toBe('lost');
  });

  it('leaves a live lease to its holder and an ended execution alone', () => {
    expect(leaseClaimOf(execution({ status: 'running', ...live }), now)).toBe('held');
    expect(leaseClaimOf(execution({ status: 'leased', ...live }), now)).toBe('held');
    for (const status of ['succeeded', 'failed', 'timed_out', 'cancelled', 'expired'] as const)
      expect(leaseClaimOf(execution({ status, ...lapsed }), now)).toBe('ended');
  });
});

describe('lostExecutionVerdict', () => {
  const facts = { action: 'test.counter', execution: { status: 'running' as const, leaseOwner: 'worker-a' } };

  it('reports the recorded result when a receipt exists, safe or not', () => {
    expect(lostExecutionVerdict({ ...facts, hasReceipt: true, safeToRetry: false })).toEqual({ kind: 'receipt' });
  });

  it('lets a started action that is safe to retry end for a new attempt', () => {
    expect(lostExecutionVerdict({ ...facts, hasReceipt: false, safeToRetry: true })).toMatchObject({
      kind: 'retry',
      error: { code: 'LEASE_EXPIRED', retryable: true },
    });
  });

  it('lets an action that never started end for a new attempt even when it is not safe to retry', () => {
    expect(
      lostExecutionVerdict({ ...facts, execution: { status: 'leased' }, hasReceipt: false, safeToRetry: false }),
    ).toMatchObject({ kind: 'retry' });
  });

  it('pauses for an operator when a started action is not safe to retry, or unknown, and left no receipt', () => {
    for (const safeToRetry of [false, undefined]) {
      const verdict = lostExecutionVerdict({ ...facts, hasReceipt: false, safeToRetry });
      expect(verdict).toMatchObject({ kind: 'pause', error: { code: 'LOST_NOT_SAFE_TO_RETRY', retryable: false } });
      expect(verdict.kind === 'pause' && verdict.error.message).toContain('test.counter');
    }
  });
});

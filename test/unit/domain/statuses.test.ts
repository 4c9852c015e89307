import { describe, expect, it } from 'vitest';
import { IllegalTransitionError } from '../../../shared/domain/errors.js';
import {
  approvalStateMachine,
  RUN_STATUSES,
  runStateMachine,
  stepExecutionStateMachine,
  workerStateMachine,
} from '../../../shared/domain/statuses.js';

describe('state machines', () => {
  it('moves a run through its happy path', () => {
    let status = runStateMachine.transition('queued', 'running');
    status = runStateMachine.transition(status, 'waiting_for_approval');
    status = runStateMachine.transition(status, 'running');
    expect(runStateMachine.transition(status, 'succeeded')).toBe('succeeded');
  });

  it('throws a typed error for an illegal run transition', () => {
    expect(() => runStateMachine.transition('succeeded', 'running')).toThrow(IllegalTransitionError);
    try {
      runStateMachine.transition('cancelled', 'queued');
    } catch (error) {
      expect(error).toMatchObject({
        code: 'ILLEGAL_TRANSITION',
        machine: 'run',
        from: 'cancelled',
        to: 'queued',
      });
    }
  });

  it('has exactly three terminal run statuses', () => {
    expect(RUN_STATUSES.filter((s) => runStateMachine.isTerminal(s))).toEqual(['succeeded', 'failed', 'cancelled']);
  });

  it('lets a throttled run be admitted later but not jump to running', () => {
    expect(runStateMachine.can('throttled', 'queued')).toBe(true);
    expect(runStateMachine.can('throttled', 'running')).toBe(false);
  });

  it('lets a paused run be retried, rolled back or cancelled', () => {
    for (const to of ['running', 'rolling_back', 'cancelled'] as const)
      expect(runStateMachine.can('paused', to)).toBe(true);
  });

  it('never lets a step execution run again once it ended', () => {
    for (const end of ['succeeded', 'failed', 'timed_out', 'cancelled', 'expired'] as const) {
      expect(stepExecutionStateMachine.isTerminal(end)).toBe(true);
    }
    expect(() => stepExecutionStateMachine.transition('pending', 'running')).toThrow(IllegalTransitionError);
  });

  it('lets a worker that came back from offline work again, but not a dead one', () => {
    expect(workerStateMachine.can('offline', 'idle')).toBe(true);
    expect(workerStateMachine.can('dead', 'idle')).toBe(false);
  });

  it('keeps an escalated approval open for a decision', () => {
    expect(approvalStateMachine.can('escalated', 'approved')).toBe(true);
    expect(approvalStateMachine.can('approved', 'rejected')).toBe(false);
  });
});

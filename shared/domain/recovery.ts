import type { ErrorInfo, StepExecution } from './entities.js';
import { stepExecutionStateMachine } from './statuses.js';

/**
 * What a worker may do with a step execution whose command it received:
 * - `lease`: take it; it is pending, or leased by a holder that stopped renewing before it started
 *   the action (no effect can have happened, so the same attempt goes on);
 * - `lost`: its holder started the action and stopped renewing: the attempt must end by the
 *   rule of `lostExecutionVerdict`, never be restarted as the same attempt;
 * - `held`: a live holder has it;
 * - `ended`: it is over.
 */
export type LeaseClaim = 'lease' | 'lost' | 'held' | 'ended';

const leaseExpired = (execution: StepExecution, now: Date): boolean =>
  execution.leaseExpiresAt !== undefined && Date.parse(execution.leaseExpiresAt) < now.getTime();

/** How a command for `execution` may be taken at `now` (see `LeaseClaim`). */
export function leaseClaimOf(execution: StepExecution, now: Date): LeaseClaim {
  if (stepExecutionStateMachine.isTerminal(execution.status)) return 'ended';
  if (execution.status === 'pending') return 'lease';
  if (!leaseExpired(execution, now)) return 'held';
  return execution.status === 'leased' ? 'lease' : 'lost';
}

/**
 * How a lost step execution ends (seed 001 section 2.2, seed 000 section 4.4), whoever finds it
 * (the reconciler's sweep, or a worker that receives its command again):
 * - `receipt`: the effect's receipt exists: the execution reports the recorded result;
 * - `retry`: the action never started, or is safe to retry: the attempt ends as expired and the
 *   planner may give the step a new attempt;
 * - `pause`: the action started, is not safe to retry and left no receipt: nobody knows whether
 *   it took effect, so the run pauses for an operator.
 */
export type LostVerdict =
  | { readonly kind: 'receipt' }
  | { readonly kind: 'retry'; readonly error: ErrorInfo }
  | { readonly kind: 'pause'; readonly error: ErrorInfo };

export interface LostFacts {
  readonly execution: Pick<StepExecution, 'status' | 'leaseOwner'>;
  readonly hasReceipt: boolean;
  /** The action's catalogue entry says it may run twice; undefined when the action is unknown. */
  readonly safeToRetry: boolean | undefined;
  /** `backend.action`, for the operator's message. */
  readonly action: string;
  /**
   * How its worker died, when the platform reported the death (a stopped task, a process that
   * exited): the lease was ended at once rather than left to lapse.
   */
  readonly died?: string;
}

/** The one rule for a step execution whose holder stopped renewing its lease. */
export function lostExecutionVerdict(facts: LostFacts): LostVerdict {
  const owner = facts.execution.leaseOwner ?? '?';
  if (facts.hasReceipt) return { kind: 'receipt' };
  if (facts.execution.status !== 'running' || facts.safeToRetry === true)
    return {
      kind: 'retry',
      error: {
        code: 'LEASE_EXPIRED',
        message:
          facts.died === undefined
            ? `worker ${owner} stopped renewing its lease`
            : `worker ${owner} died (${facts.died}); its lease was ended at once`,
        retryable: true,
      },
    };
  const lost = facts.died === undefined ? 'was lost' : `died (${facts.died})`;
  return {
    kind: 'pause',
    error: {
      code: 'LOST_NOT_SAFE_TO_RETRY',
      message: `worker ${owner} ${lost} during ${facts.action}, which is not safe to retry and left no receipt; an operator must check its effect and resume the run`,
      retryable: false,
    },
  };
}

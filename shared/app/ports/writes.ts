import type { Approval, StepExecution } from '../../domain/entities.js';
import type { Aggregate, Receipt } from '../../domain/step-records.js';
import type { StepExecutionStatus } from '../../domain/statuses.js';
import type { AdmissionWrite } from './admission.js';

type StepKind = 'step' | 'rollback';
/** Which step attempt's aggregate a write counts into. */
export interface AggregateRef {
  readonly runId: string;
  readonly stepKind: StepKind;
  readonly stepId: string;
  readonly attempt: number;
}

/**
 * A write that commits with a run's events, all or nothing. Each carries its own condition; when
 * one does not hold, the whole change is refused with `StaleWriteError`.
 */
export type WriteIntent =
  /** A new step execution; refused when it exists. */
  | { readonly kind: 'putExecution'; readonly execution: StepExecution }
  /** Replaces an execution still in one of `from` (and, when given, leased by `owner`). */
  | {
      readonly kind: 'updateExecution';
      readonly execution: StepExecution;
      readonly from: readonly StepExecutionStatus[];
      readonly owner?: string;
    }
  /** Ends an execution still leased or running whose lease has not been renewed since `now`. */
  | { readonly kind: 'expireExecution'; readonly execution: StepExecution; readonly now: Date }
  /** A new step aggregate; refused when it exists. */
  | { readonly kind: 'putAggregate'; readonly runId: string; readonly aggregate: Aggregate }
  /**
   * Counts one target's result; refused when the aggregate is missing or already full. With
   * `completes`, the aggregate has one execution and this count also claims its completion
   * (refused unless its total is one).
   */
  | {
      readonly kind: 'countResult';
      readonly ref: AggregateRef;
      readonly succeeded: boolean;
      readonly completes?: boolean;
    }
  /** Counts `count` executions failed before reaching a worker; refused past the aggregate's `total`. */
  | { readonly kind: 'countUnsent'; readonly ref: AggregateRef; readonly count: number; readonly total: number }
  /** Gives targets `from`..`to` of a fan-out unit their executions; refused unless `from` were released. */
  | { readonly kind: 'releaseTargets'; readonly ref: AggregateRef; readonly from: number; readonly to: number }
  /** Counts a unit's `count` waiting targets (from `from`) as skipped and done; refused unless `from` were released. */
  | { readonly kind: 'skipTargets'; readonly ref: AggregateRef; readonly from: number; readonly count: number }
  /** A new receipt; refused when the key has one. */
  | { readonly kind: 'putReceipt'; readonly receipt: Receipt }
  /** A new approval gate; refused when it exists. */
  | { readonly kind: 'putApproval'; readonly approval: Approval }
  /** A gate's new state, if it still stands as `was` (same status, same number of decisions). */
  | {
      readonly kind: 'updateApproval';
      readonly approval: Approval;
      readonly was: Pick<Approval, 'status' | 'decisions'>;
    }
  /** Makes the run its ticket's one active run; refused while another run holds the ticket. */
  | {
      readonly kind: 'claimTicket';
      readonly tenantId: string;
      readonly ticketId: string;
      readonly runId: string;
      readonly since: string;
    }
  /** Admission counters and cells (quotas, backlog, dependencies); see `./admission.ts`. */
  | AdmissionWrite;

const ref = (runId: string, stepKind: StepKind, stepId: string, attempt: number): AggregateRef => ({
  runId,
  stepKind,
  stepId,
  attempt,
});

/** Builders of write intents, so call sites read as what they do. */
export const writes = {
  putExecution: (execution: StepExecution): WriteIntent => ({ kind: 'putExecution', execution }),
  updateExecution: (execution: StepExecution, from: readonly StepExecutionStatus[], owner?: string): WriteIntent => ({
    kind: 'updateExecution',
    execution,
    from,
    ...(owner !== undefined && { owner }),
  }),
  expireExecution: (execution: StepExecution, now: Date): WriteIntent => ({ kind: 'expireExecution', execution, now }),
  putAggregate: (runId: string, aggregate: Aggregate): WriteIntent => ({ kind: 'putAggregate', runId, aggregate }),
  countResult: (
    runId: string,
    stepKind: StepKind,
    stepId: string,
    attempt: number,
    succeeded: boolean,
    completes = false,
  ): WriteIntent => ({
    kind: 'countResult',
    ref: ref(runId, stepKind, stepId, attempt),
    succeeded,
    ...(completes && { completes }),
  }),
  countUnsent: (
    runId: string,
    stepKind: StepKind,
    stepId: string,
    attempt: number,
    count: number,
    total: number,
  ): WriteIntent => ({ kind: 'countUnsent', ref: ref(runId, stepKind, stepId, attempt), count, total }),
  releaseTargets: (ref: AggregateRef, from: number, to: number): WriteIntent => ({
    kind: 'releaseTargets',
    ref,
    from,
    to,
  }),
  skipTargets: (ref: AggregateRef, from: number, count: number): WriteIntent => ({
    kind: 'skipTargets',
    ref,
    from,
    count,
  }),
  putReceipt: (receipt: Receipt): WriteIntent => ({ kind: 'putReceipt', receipt }),
  putApproval: (approval: Approval): WriteIntent => ({ kind: 'putApproval', approval }),
  updateApproval: (approval: Approval, was: Pick<Approval, 'status' | 'decisions'>): WriteIntent => ({
    kind: 'updateApproval',
    approval,
    was,
  }),
};

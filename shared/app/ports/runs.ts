import type { Run, StepExecution } from '../../domain/entities.js';
import type { ChainHead, EventDraft, RunEvent } from '../../domain/events.js';
import type { StagedEvent } from '../../domain/inbox.js';
import type { LeaseClaim } from '../../domain/recovery.js';
import type { Aggregate, Receipt } from '../../domain/step-records.js';
import type { RunStatus } from '../../domain/statuses.js';
import type { Page } from '../ports.js';
import type { WriteIntent } from './writes.js';

/** A run as stored: the entity, its chain head, and what the interpreter keeps beside it. */
export interface RunRecord {
  readonly run: Run;
  readonly head: ChainHead;
  readonly rollbackRequested: boolean;
  readonly executionArn?: string;
}

/**
 * A record as plain data, to travel with the decision made on it (in the interpreter's state) and
 * be held again by the task that acts on it, which then need not read the run.
 */
export interface CarriedRun {
  readonly record: RunRecord;
  /**
   * The run's revision when the record was read or written; null for a run stored without one
   * (written before revisions), which a held record then matches only while it still has none.
   */
  readonly revision: number | null;
}

/** A change to a run: its events, the run's new fields, and other writes committed with them. */
export interface RunChange {
  readonly events: readonly EventDraft[];
  /** New values for run fields (the run entity is stored whole, so this is merged and re-validated). */
  readonly run?: Partial<Run>;
  readonly rollbackRequested?: boolean;
  readonly executionArn?: string;
  /** Further writes, each with its own condition; any failing condition aborts the whole change. */
  readonly writes?: readonly WriteIntent[];
}

/** What a committed change left: the run as it now stands and the events appended. */
export interface Committed {
  readonly record: RunRecord;
  readonly events: RunEvent[];
}

/** What an append left: the chain's new head and the events appended. */
export interface Appended {
  readonly head: ChainHead;
  readonly events: RunEvent[];
}

/**
 * The outcome of creating a run under an idempotency key: the run as stored (which `carry` can
 * send on), or the run the key already names.
 */
export type Created = { created: true; record: RunRecord } | { created: false; runId: string; requestHash: string };

/**
 * Runs and their event log. Every change appends its events in the same transaction as the state
 * it describes, guarded by the run's chain head, so the log has no gap and no duplicate seq.
 */
export interface RunLog {
  load(runId: string): Promise<RunRecord | undefined>;
  /** `record` as data that can travel; undefined for a record this store did not read or write. */
  carry(record: RunRecord): CarriedRun | undefined;
  /**
   * A carried record, held again: `mutate` given it as `known` decides on it without a read, and
   * its write is refused, as any held record's, when the run changed since it was carried.
   */
  hold(carried: CarriedRun): RunRecord;
  /**
   * Applies `decide` to the run and commits what it returns; when another writer moved the chain
   * first, reads again and decides again. `decide` returning undefined means nothing to do.
   * `known` is a record the caller already holds: the first attempt decides on it without a read.
   * Throws `StaleWriteError` when a write's own condition fails.
   */
  mutate(
    runId: string,
    decide: (record: RunRecord) => RunChange | undefined,
    known?: RunRecord,
  ): Promise<Committed | undefined>;
  /**
   * Appends events that leave the run entity as it is (a worker's records of its step execution)
   * with their writes, chained on `head` when the caller holds one: nothing is read unless it is
   * missing or stale (another writer moved the chain since). Resolves the head the events left.
   * Throws `StaleWriteError` when a write's own condition fails.
   */
  append(
    run: Pick<Run, 'runId' | 'tenantId'>,
    change: Pick<RunChange, 'events' | 'writes'>,
    head?: ChainHead,
  ): Promise<Appended>;
  /**
   * Commits `writes` with `events` staged in the run's inbox (see `domain/inbox.ts`) instead of on
   * its chain head: nothing shared is written, so a fan-out's targets never contend. The state and
   * its events still commit together; the events take their place in the chain at the next
   * `sequence`. Throws `StaleWriteError` when a write's own condition fails (nothing is staged).
   */
  stage(runId: string, events: readonly StagedEvent[], writes: readonly WriteIntent[]): Promise<void>;
  /**
   * Moves the inbox's events into the chain, in batches, each on the head the last one left. By
   * default it goes on until the inbox is empty: when it returns, every event staged before the
   * call is in the chain. With `eager: false` it gives up after losing a race, since the winner
   * moved the chain and whoever sequences next takes what is left: for writers that only want
   * their events on the live stream soon, without every target racing every other.
   */
  sequence(runId: string, options?: { readonly eager?: boolean }): Promise<void>;
  /** Runs whose inbox has held an event since before `before`: a writer died before sequencing it. */
  stalledInboxes(before: Date, limit?: number): Promise<string[]>;
  /**
   * Stores a new run with its first events and, when given, its idempotency record. A run with a
   * ticket takes the ticket's one active-run slot; throws `TicketBusyError` when another run holds it.
   */
  create(
    run: Run,
    firstEvents: readonly EventDraft[],
    idempotency: { key: string; requestHash: string } | undefined,
  ): Promise<Created>;
  list(tenantId: string, options: { status?: RunStatus; limit: number; cursor?: string }): Promise<Page<Run>>;
  /** A ticket's runs in one tenant, newest first. */
  listByTicket(tenantId: string, ticketId: string, options: { limit: number; cursor?: string }): Promise<Page<Run>>;
  /** Events after `since`, in seq order, at most `limit`. */
  events(runId: string, since: number, limit: number): Promise<RunEvent[]>;
  /**
   * Runs not ended yet that were created before `before`, oldest first; after the run `after` when
   * given (a sweep going on from where the last one stopped).
   */
  activeRuns(before: Date, limit?: number, after?: Pick<Run, 'createdAt' | 'runId'>): Promise<RunRecord[]>;
}

/** What `acquireLease` got: the lease, a lost execution to recover, or nothing to do. */
export type LeaseOutcome =
  | { readonly claim: 'lease' | 'lost'; readonly execution: StepExecution }
  | { readonly claim: Exclude<LeaseClaim, 'lease' | 'lost'> };

/** Step executions and their leases. */
export interface StepExecutions {
  executions(runId: string): Promise<StepExecution[]>;
  execution(runId: string, executionId: string): Promise<StepExecution | undefined>;
  /**
   * Takes the lease when `leaseClaimOf` allows it; an execution whose holder was lost mid-action
   * comes back as `lost`, to be ended by the recovery rule, never taken over.
   */
  acquireLease(runId: string, executionId: string, owner: string, now: Date, leaseMs: number): Promise<LeaseOutcome>;
  /** Extends a lease the caller holds; false when it no longer holds it. */
  renewLease(runId: string, executionId: string, owner: string, until: Date): Promise<boolean>;
  /** Step executions whose lease expired before `now`, oldest first. */
  expiredLeases(now: Date, limit?: number): Promise<Array<{ runId: string; executionId: string }>>;
}

/** The per-attempt aggregates that decide when a step is complete. */
export interface Aggregates {
  aggregates(runId: string): Promise<Aggregate[]>;
  aggregate(runId: string, kind: string, stepId: string, attempt: number): Promise<Aggregate | undefined>;
  /**
   * Gives an aggregate the token of the task now waiting for it; resolves the aggregate as that
   * left it, so a completion that came in meanwhile is seen (undefined when there is none).
   */
  setAggregateToken(
    runId: string,
    kind: string,
    stepId: string,
    attempt: number,
    taskToken: string,
  ): Promise<Aggregate | undefined>;
  /** Marks a full aggregate complete; exactly one caller gets it back, with the token to resume. */
  claimCompletion(runId: string, kind: string, stepId: string, attempt: number): Promise<Aggregate | undefined>;
}

/** Receipts of steps that succeeded, by idempotency key. */
export interface Receipts {
  receipt(key: string): Promise<Receipt | undefined>;
}

/** Task tokens of interpreter tasks waiting on a person or an operator. */
export interface WaitTokens {
  /** Keeps the token of a waiting task (`resume`, `approval`), replacing an older one. */
  putWaitToken(runId: string, waitingFor: string, taskToken: string, at: string): Promise<void>;
  /** Takes a waiting task's token, so exactly one caller resumes it. */
  claimWaitToken(runId: string, waitingFor: string): Promise<string | undefined>;
}

/** A run and its step executions, as one read found them. */
export interface RunSnapshot {
  readonly record: RunRecord;
  readonly executions: StepExecution[];
}

/** The run and its step executions together, for a use case that decides on both (Plan). */
export interface RunSnapshots {
  /**
   * The run (a record `carry` can send on) and its step executions in one read; undefined when
   * there is no such run.
   */
  snapshot(runId: string): Promise<RunSnapshot | undefined>;
}

/** Everything kept about runs, as one port; use cases name the parts they use. */
export type RunStore = RunLog & StepExecutions & RunSnapshots & Aggregates & Receipts & WaitTokens;

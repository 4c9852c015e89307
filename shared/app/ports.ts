import type { Approval, Run, RunbookVersion, Worker } from '../domain/entities.js';

/** Current time, passed in so use cases stay testable. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A page of results and the cursor of the next one, when there is one. */
export interface Page<T> {
  readonly items: readonly T[];
  readonly nextCursor?: string;
}

/** Summary of a runbook: its id and latest version. */
export interface RunbookHead {
  readonly runbookId: string;
  readonly latestVersion: number;
  readonly digest: string;
  readonly description?: string;
  readonly updatedAt: string;
}

/** Where runbook versions are kept. Versions are immutable; the same digest is stored once. */
export interface RunbookStore {
  /** The version of this runbook with this digest, if one was stored. */
  findByDigest(tenantId: string, runbookId: string, digest: string): Promise<RunbookVersion | undefined>;
  /** The head (latest version) of a runbook, if it exists. */
  head(tenantId: string, runbookId: string): Promise<RunbookHead | undefined>;
  /**
   * Stores a new version. Resolves `false` when another writer stored this version number or
   * this digest first (the caller reads again and retries).
   */
  putVersion(version: RunbookVersion, description: string | undefined): Promise<boolean>;
  get(tenantId: string, runbookId: string, version: number): Promise<RunbookVersion | undefined>;
  list(tenantId: string, limit: number, cursor?: string): Promise<Page<RunbookHead>>;
}

/** What a worker reports with each heartbeat. */
export interface Heartbeat {
  readonly status: 'idle' | 'busy' | 'draining';
  readonly at: string;
  readonly currentExecutionId?: string;
  readonly stats: { readonly cpuPercent: number; readonly rssBytes: number; readonly tasksCompleted: number };
}

/** Where workers register and heartbeat (seed 002). */
export interface WorkerStore {
  register(worker: Worker): Promise<void>;
  /** Records a heartbeat; `accepted: false` when the worker was declared dead or deregistered. */
  heartbeat(workerId: string, beat: Heartbeat): Promise<{ accepted: boolean; drainRequested: boolean }>;
  /** Moves a live worker to `status`; with `expected`, only if it has not heartbeat since. */
  setStatus(
    workerId: string,
    status: 'dead' | 'deregistered' | 'idle',
    expected?: Pick<Worker, 'lastHeartbeatAt'>,
  ): Promise<boolean>;
  /** Marks a worker idle when it still shows busy with `executionId` (drift repair). */
  clearCurrent(workerId: string, executionId: string): Promise<boolean>;
  /** Asks a live worker to drain; false when there is no such live worker. */
  requestDrain(workerId: string): Promise<boolean>;
  list(): Promise<Array<Worker & { drainRequested: boolean }>>;
}

/** Tells people about approval gates; an adapter that cannot deliver logs and carries on. */
export interface ApprovalAlerts {
  /** A gate waits for people: the run, step, proposed action, policy reason and a link. */
  requested(approval: Approval, run: Run): Promise<void>;
  /** A gate passed its SLA and keeps waiting: the escalation. */
  escalated(approval: Approval, run: Run): Promise<void>;
}

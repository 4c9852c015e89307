import type { Approval } from '../../domain/entities.js';

/** Approval gates, kept beside their run; new and changed gates are written as `WriteIntent`s. */
export interface ApprovalStore {
  /** A run's gates, oldest first. */
  list(runId: string): Promise<Approval[]>;
  get(runId: string, approvalId: string): Promise<Approval | undefined>;
  /** Open gates whose SLA or hard limit has passed, oldest first. */
  due(now: Date, limit?: number): Promise<Array<{ runId: string; approvalId: string }>>;
}

/**
 * Every key and index value of the state table, defined once. A run's partition (`RUN#id`) holds
 * its head (`META`), step executions (`SE#`), aggregates (`AGG#`), wait tokens (`WAIT#`),
 * approval gates (`APPROVAL#`) and its inbox of staged events (`INBOX#`), so a change to any of them commits with the run's events.
 */
export const META = 'META';
export const prefixes = {
  execution: 'SE#',
  aggregate: 'AGG#',
  wait: 'WAIT#',
  approval: 'APPROVAL#',
  inbox: 'INBOX#',
} as const;

export const runKey = (runId: string) => `RUN#${runId}`;
export const runsListKey = (tenantId: string) => `TENANT#${tenantId}#RUNS`;
export const idempotencyKey = (tenantId: string, key: string) => `TENANT#${tenantId}#IDEMP#${key}`;
export const receiptKey = (key: string) => `RECEIPT#${key}`;
export const executionSk = (executionId: string) => `${prefixes.execution}${executionId}`;
export const aggregateSk = (kind: string, stepId: string, attempt: number) =>
  `${prefixes.aggregate}${kind}#${stepId}#${String(attempt).padStart(4, '0')}`;
export const waitSk = (waitingFor: string) => `${prefixes.wait}${waitingFor}`;
export const approvalSk = (approvalId: string) => `${prefixes.approval}${approvalId}`;

/** gsi2 partitions: sparse indexes the reconciler sweeps. */
export const indexes = {
  /** Step executions holding a lease, by expiry. */
  leases: 'LEASES',
  /** Runs not yet ended, by creation. */
  activeRuns: 'ACTIVE_RUNS',
  /** Open gates by when time next acts on them (SLA, then hard limit). */
  approvalsDue: 'APPROVALS_DUE',
  /** Staged events not yet in their run's chain, by when they were staged. */
  inboxes: 'INBOXES',
} as const;

export const leaseIndexSk = (until: string, runId: string, executionId: string) => `${until}#${runId}#${executionId}`;

/** A tenant's inventory: one partition per tenant, so a listing can only ever read that tenant's nodes. */
export const inventoryKey = (tenantId: string) => `TENANT#${tenantId}#NODES`;
export const nodeSk = (nodeId: string) => `NODE#${nodeId}`;

import type { Principal } from '../domain/entities.js';
import { RUN_STATUSES, type RunStatus, WORKER_STATUSES, type WorkerStatus } from '../domain/statuses.js';
import { livenessOf, workerScopeOf } from '../domain/workers.js';
import type { ApprovalStore } from './ports/approvals.js';
import type { QueueDepths } from './ports/capacity.js';
import type { RunStore } from './ports/runs.js';
import type { Clock, WorkerStore } from './ports.js';

export type { QueueDepths };

export interface DashboardDeps {
  readonly runs: Pick<RunStore, 'list'>;
  readonly approvals: Pick<ApprovalStore, 'list'>;
  readonly workers: Pick<WorkerStore, 'list'>;
  readonly queues: QueueDepths;
  readonly clock: Clock;
  readonly heartbeatMs: number;
  /** The deployment's own tenant, whose principals see the fleet (workers and queues). */
  readonly platformTenant: string | undefined;
  /** The most recent runs counted. @default 1000 */
  readonly runWindow?: number;
  /** The most runs waiting for approval whose gates are read. @default 50 */
  readonly waitingWindow?: number;
}

/** A tenant's figures at one moment (seed 004 section 9.3). */
export interface DashboardMetrics {
  readonly tenantId: string;
  readonly at: string;
  readonly runs: {
    readonly byStatus: Record<RunStatus, number>;
    /** Runs counted, newest first; `complete` is false when the tenant has more than the window. */
    readonly counted: number;
    readonly complete: boolean;
  };
  readonly approvals: { readonly waiting: number; readonly oldestWaitingSeconds: number | null };
  readonly failures: { readonly lastHour: number };
  /** Shared infrastructure: for the platform tenant only. */
  readonly queues?: Record<string, number>;
  readonly workers?: Record<WorkerStatus, number>;
}

const PAGE = 100;
const HOUR_MS = 3_600_000;

const zeros = <K extends string>(keys: readonly K[]): Record<K, number> =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;

/**
 * The dashboard's figures for the caller's tenant, from stored state: its runs by status (the
 * newest `runWindow` of its per-tenant list, so a request reads a bounded number of pages), the
 * gates its waiting runs hold and the age of the oldest, its runs that failed in the last hour;
 * and, for the platform tenant only, the queue depth per profile and the workers by status.
 */
export function makeDashboardMetrics(deps: DashboardDeps) {
  const runWindow = deps.runWindow ?? 1000;
  const waitingWindow = deps.waitingWindow ?? 50;

  async function countRuns(tenantId: string, now: Date) {
    const byStatus = zeros(RUN_STATUSES);
    const waiting: string[] = [];
    let counted = 0;
    let lastHour = 0;
    let cursor: string | undefined;
    do {
      const page = await deps.runs.list(tenantId, { limit: Math.min(PAGE, runWindow - counted), cursor });
      for (const run of page.items) {
        byStatus[run.status]++;
        if (run.status === 'waiting_for_approval') waiting.push(run.runId);
        const endedAt = Date.parse(run.endedAt ?? run.updatedAt);
        if (run.status === 'failed' && endedAt >= now.getTime() - HOUR_MS) lastHour++;
      }
      counted += page.items.length;
      cursor = page.nextCursor;
    } while (cursor && counted < runWindow);
    return { byStatus, counted, complete: cursor === undefined, waiting, lastHour };
  }

  async function waitingGates(runIds: readonly string[], now: Date) {
    const gates = (await Promise.all(runIds.slice(0, waitingWindow).map((id) => deps.approvals.list(id)))).flat();
    const open = gates.filter((g) => g.status === 'requested' || g.status === 'escalated');
    const oldest = Math.min(...open.map((g) => Date.parse(g.requestedAt)));
    return {
      waiting: open.length,
      oldestWaitingSeconds: open.length > 0 ? Math.max(0, Math.round((now.getTime() - oldest) / 1000)) : null,
    };
  }

  async function fleet(now: Date) {
    const [depths, workers] = await Promise.all([deps.queues.depths(), deps.workers.list()]);
    const byStatus = zeros(WORKER_STATUSES);
    for (const worker of workers) byStatus[livenessOf(worker, now, deps.heartbeatMs).status]++;
    return { queues: Object.fromEntries(depths), workers: byStatus };
  }

  return async function dashboardMetrics(principal: Principal): Promise<DashboardMetrics> {
    const now = deps.clock.now();
    const seesFleet = workerScopeOf(principal, deps.platformTenant).kind === 'fleet';
    const runs = await countRuns(principal.tenantId, now);
    const [approvals, shared] = await Promise.all([
      waitingGates(runs.waiting, now),
      seesFleet ? fleet(now) : Promise.resolve(undefined),
    ]);
    return {
      tenantId: principal.tenantId,
      at: now.toISOString(),
      runs: { byStatus: runs.byStatus, counted: runs.counted, complete: runs.complete },
      approvals,
      failures: { lastHour: runs.lastHour },
      ...shared,
    };
  };
}

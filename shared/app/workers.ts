import { z } from 'zod';
import type { Principal, Worker } from '../domain/entities.js';
import { ForbiddenError, NotFoundError } from '../domain/errors.js';
import { livenessOf, workerScopeOf } from '../domain/workers.js';
import type { Clock, WorkerStore } from './ports.js';

export interface WorkerDeps {
  readonly workers: WorkerStore;
  readonly clock: Clock;
  readonly heartbeatMs: number;
  /** The deployment's own tenant, whose principals see and drain the fleet; unset, nobody does. */
  readonly platformTenant: string | undefined;
}

/**
 * Refuses a principal outside the platform tenant before anything is read, so the answer is
 * the same whatever worker id was asked for: another tenant learns nothing about the fleet.
 */
function requireFleet(deps: WorkerDeps, principal: Principal, doing: string): void {
  if (workerScopeOf(principal, deps.platformTenant).kind !== 'fleet') {
    throw new ForbiddenError(`${doing} is for the deployment's platform tenant: workers are shared infrastructure`);
  }
}

export const workerPathSchema = z.object({
  id: z.string().regex(/^[A-Za-z0-9._:-]{1,200}$/, 'must be a worker id'),
});

export const listWorkersQuerySchema = z.strictObject({
  status: z.enum(['idle', 'busy', 'draining', 'offline', 'dead', 'deregistered']).optional(),
  profile: z.string().optional(),
});

/** A worker as listed: its registration, what it last reported, and its status as of now. */
export type WorkerView = Worker & { drainRequested: boolean; missedBeats: number; secondsSinceHeartbeat: number };

/**
 * Lists the registered workers with their status derived from the last heartbeat: a worker
 * silent for three heartbeats shows as offline until the reconciler declares it dead.
 */
export function makeListWorkers(deps: WorkerDeps) {
  return async (principal: Principal, query: z.infer<typeof listWorkersQuerySchema>): Promise<WorkerView[]> => {
    requireFleet(deps, principal, 'listing workers');
    const now = deps.clock.now();
    return (await deps.workers.list())
      .map((worker) => {
        const liveness = livenessOf(worker, now, deps.heartbeatMs);
        return {
          ...worker,
          status: liveness.status,
          missedBeats: liveness.missedBeats,
          secondsSinceHeartbeat: Math.round(liveness.silentMs / 1000),
        };
      })
      .filter((w) => (query.status ? w.status === query.status : true))
      .filter((w) => (query.profile ? w.sandboxProfile === query.profile : true))
      .sort((a, b) => a.workerId.localeCompare(b.workerId));
  };
}

/**
 * Asks a worker to drain: it stops receiving, finishes its current step, deregisters and exits.
 * The worker sees the request with its next heartbeat.
 */
export function makeDrainWorker(deps: WorkerDeps) {
  return async (principal: Principal, workerId: string) => {
    requireFleet(deps, principal, 'draining a worker');
    if (!(await deps.workers.requestDrain(workerId)))
      throw new NotFoundError(`no live worker '${workerId}' (it may have deregistered or been declared dead)`);
    return { workerId, drainRequested: true, seenWithinSeconds: Math.ceil(deps.heartbeatMs / 1000) };
  };
}

import type { Worker } from './entities.js';
import type { WorkerStatus } from './statuses.js';

/** Heartbeats a worker may miss before it shows as offline and the reconciler marks it dead. */
export const MISSED_BEATS_OFFLINE = 3;

/** A lease lasts two heartbeats: one missed renewal is tolerated, a second means the holder is gone. */
export const LEASE_HEARTBEATS = 2;

/**
 * A worker's status as seen now: what it last reported, unless it has been silent for
 * `MISSED_BEATS_OFFLINE` heartbeats (offline). Dead and deregistered are final.
 */
export function livenessOf(worker: Pick<Worker, 'status' | 'lastHeartbeatAt'>, now: Date, heartbeatMs: number) {
  const silentMs = now.getTime() - Date.parse(worker.lastHeartbeatAt);
  const status: WorkerStatus =
    worker.status === 'dead' || worker.status === 'deregistered'
      ? worker.status
      : silentMs > MISSED_BEATS_OFFLINE * heartbeatMs
        ? 'offline'
        : worker.status;
  return { status, silentMs, missedBeats: Math.max(0, Math.floor(silentMs / heartbeatMs)) };
}

/** Whether the reconciler should declare the worker dead. */
export function isSilent(worker: Pick<Worker, 'status' | 'lastHeartbeatAt'>, now: Date, heartbeatMs: number): boolean {
  return livenessOf(worker, now, heartbeatMs).status === 'offline';
}

/**
 * Which workers a principal may see and drain. Workers are fleet infrastructure that belongs to
 * the deployment, so only principals of the deployment's own (platform) tenant see the fleet;
 * every other tenant sees none. Agent nodes registered per tenant will add a third kind,
 * `{ kind: 'tenant', tenantId }`, that sees the workers registered for that tenant.
 */
export type WorkerScope = { readonly kind: 'fleet' } | { readonly kind: 'none' };

/** The principal's worker scope, given the deployment's platform tenant (none when unset). */
export function workerScopeOf(
  principal: { readonly tenantId: string },
  platformTenant: string | undefined,
): WorkerScope {
  return platformTenant !== undefined && principal.tenantId === platformTenant ? { kind: 'fleet' } : { kind: 'none' };
}

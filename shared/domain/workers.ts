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

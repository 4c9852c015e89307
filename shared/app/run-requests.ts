import type { RunChange, RunRecord } from './ports/runs.js';
import { draft } from './drafts.js';

/**
 * The change that asks a run to stop: no further step is dispatched, and Plan ends the run
 * `cancelled` once nothing runs. The one definition behind `POST /cancel` and a paused run's
 * `cancel` directive.
 */
export function cancelChange(requestedBy: string, now: string): RunChange {
  return {
    run: { cancelRequested: true, updatedAt: now },
    events: [draft('run.cancel_requested', now, { requestedBy })],
  };
}

/**
 * The change that asks a run to roll back what it has done, newest first: a run held by a gate or
 * an operator goes straight to `rolling_back`, a running one once its current step ends. The one
 * definition behind `POST /rollback` and a paused run's `rollback` directive.
 */
export function rollbackChange(
  current: RunRecord,
  requestedBy: string,
  now: string,
  reason: 'requested' | 'directive',
): RunChange {
  const held = current.run.status === 'paused' || current.run.status === 'waiting_for_approval';
  return {
    rollbackRequested: true,
    run: { updatedAt: now, ...(held && { status: 'rolling_back' as const }) },
    events: [draft('rollback.started', now, { requestedBy, reason })],
  };
}

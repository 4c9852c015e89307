import type { Run } from '../entities.js';

/** A run that waits, never admitted, behind its ticket's active run or on its dependencies. */
export function waitsBeforeAdmission(run: Pick<Run, 'status' | 'admission' | 'queuedBehind' | 'dependsOn'>): boolean {
  if (run.status !== 'queued' || run.admission) return false;
  return run.queuedBehind !== undefined || (run.dependsOn?.length ?? 0) > 0;
}

/**
 * A run admission has not let go: `throttled`, or waiting before admission. It has no interpreter
 * execution yet, so only admission may start it, and a cancel ends it at once.
 */
export function heldByAdmission(run: Pick<Run, 'status' | 'admission' | 'queuedBehind' | 'dependsOn'>): boolean {
  return run.status === 'throttled' || waitsBeforeAdmission(run);
}

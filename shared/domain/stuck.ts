import { durationMs } from './duration.js';
import { allSteps, type Runbook } from './runbook.js';
import type { RunStatus } from './statuses.js';

/**
 * The statuses in which a run is expected to move on its own. A run waiting for an approval has
 * its own clock (the SLA), and a paused or throttled run waits for an operator or admission.
 */
const MOVING: ReadonlySet<RunStatus> = new Set(['running', 'rolling_back']);

/** The longest a single step or rollback of the runbook may run before it must have reported. */
export function longestStepTimeoutMs(runbook: Pick<Runbook, 'phases'>): number {
  let longest = 0;
  for (const { step } of allSteps(runbook)) {
    longest = Math.max(
      longest,
      durationMs(step.timeout),
      step.rollback?.timeout ? durationMs(step.rollback.timeout) : 0,
    );
  }
  return longest;
}

/**
 * A run is stuck when it should be moving and its log has been silent for longer than its
 * longest step timeout: every attempt of every step appends an event, and no step may take longer.
 */
export function isStuck(status: RunStatus, lastEventAt: Date, runbook: Pick<Runbook, 'phases'>, now: Date): boolean {
  return MOVING.has(status) && now.getTime() - lastEventAt.getTime() > longestStepTimeoutMs(runbook);
}

import type { Run } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import type { RunChange } from './ports/runs.js';
import type { WriteIntent } from './ports/writes.js';
import { draft } from './drafts.js';

/**
 * A run starts with the first change the interpreter makes to it: that change also moves a
 * `queued` run to `running` (unless it sets another status) with `run.started` first, in the same
 * transaction. Plan makes it for a run that waits or ends before any step; Dispatch for one whose
 * first step goes out, so a new run's path to its first step is one write shorter. A change to a
 * run already started is returned as it is.
 */
export function startingWith(current: Pick<Run, 'status'>, change: RunChange, now: string): RunChange {
  if (current.status !== 'queued') return change;
  return {
    ...change,
    run: { status: 'running', ...change.run, startedAt: now },
    events: [draft('run.started', now, {}), ...change.events],
  };
}

/**
 * What Dispatch writes for a step, whether it goes out, is refused or ends before it starts: its
 * events and writes, the run's current step, and the run's start when this is its first step.
 */
export function stepDispatchChange(
  current: Pick<Run, 'status'>,
  stepId: string,
  events: readonly EventDraft[],
  writes: readonly WriteIntent[],
  now: string,
): RunChange {
  return startingWith(current, { run: { currentStepId: stepId, updatedAt: now }, events, writes }, now);
}

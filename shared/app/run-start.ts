import type { Run } from '../domain/entities.js';
import type { RunChange } from './ports/runs.js';
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

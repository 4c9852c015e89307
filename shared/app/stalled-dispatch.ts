import type { RunRecord, RunStore } from './ports/runs.js';
import type { StepExecution } from '../domain/entities.js';
import type { RunEvent } from '../domain/events.js';
import { stepExecutionStateMachine } from '../domain/statuses.js';
import type { Aggregate } from '../domain/step-records.js';
import type { Fanout } from './fanout.js';
import { countsInto } from './unsent.js';

/** How long a `pending` execution nobody leased may wait, in a run with no event, before its command is sent again. */
export const UNSENT_AFTER_MS = 2 * 60_000;

export interface StalledDeps {
  readonly runs: RunStore;
  readonly fanout: Fanout;
  readonly log: (message: string, fields?: Record<string, unknown>) => void;
}

export interface StalledRepairs {
  /** Fan-out units whose waiting targets were released again. */
  readonly releases: number;
  /** Pending executions whose command was sent again. */
  readonly resent: number;
}

/**
 * Two repairs of a dispatch that a crash cut short, for a quiet run whose interpreter still waits:
 *
 * - A fan-out unit not completed, with targets still waiting (`released < total`) and none of its
 *   executions in flight: the worker that ended the last one died between counting its result and
 *   releasing the next targets, and no other result will come to release them. The fan-out release
 *   runs again; its conditional `released` mark keeps it from starting a target twice.
 * - A `pending` execution no worker leased, older than `UNSENT_AFTER_MS` in a run with no event for
 *   as long: it was committed and its command never sent (a crash between the commit and the
 *   send). Its command is sent again; if the first did arrive after all, the lease makes the
 *   second delivery a no-op. A run still appending events is draining a backlog instead, and is
 *   left alone.
 */
export function makeRepairStalled(deps: StalledDeps) {
  const inFlight = (e: StepExecution) => !stepExecutionStateMachine.isTerminal(e.status);
  const countsIn = (e: StepExecution, a: Aggregate) => {
    const into = countsInto(e);
    return e.kind === a.kind && into.stepId === a.stepId && into.attempt === a.attempt;
  };

  return async function repairStalled(
    record: RunRecord,
    aggregates: readonly Aggregate[],
    last: RunEvent | undefined,
    now: Date,
  ): Promise<StalledRepairs> {
    const { runId } = record.run;
    const executions = await deps.runs.executions(runId);
    let releases = 0;
    for (const aggregate of aggregates) {
      if (aggregate.completed || !aggregate.targets || !aggregate.limits) continue;
      if ((aggregate.released ?? 0) >= aggregate.total) continue;
      if (executions.some((e) => inFlight(e) && countsIn(e, aggregate))) continue;
      await deps.fanout.release(runId, {
        runId,
        stepKind: aggregate.kind,
        stepId: aggregate.stepId,
        attempt: aggregate.attempt,
      });
      releases++;
      deps.log('stalled fan-out released', { runId, stepId: aggregate.stepId, released: aggregate.released });
    }

    const bound = now.getTime() - UNSENT_AFTER_MS;
    if (record.run.cancelRequested || !last || Date.parse(last.timestamp) > bound) return { releases, resent: 0 };
    const unsent = executions.filter(
      (e) => e.status === 'pending' && e.leaseOwner === undefined && Date.parse(e.createdAt) <= bound,
    );
    if (unsent.length === 0) return { releases, resent: 0 };
    const runbook = await deps.fanout.runbookFor(record.run);
    // A step of one execution: its command carries the token of the task waiting on it, as Dispatch's did.
    const [only] = unsent;
    const single = unsent.length === 1 && only ? aggregates.find((a) => countsIn(only, a) && a.total === 1) : undefined;
    await deps.fanout.send(record, runbook, unsent, single && { taskToken: single.taskToken, chainHead: record.head });
    deps.log('unsent commands sent again', { runId, executions: unsent.map((e) => e.executionId) });
    return { releases, resent: unsent.length };
  };
}

import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Principal } from '../domain/entities.js';
import { ConflictError } from '../domain/errors.js';
import { runStateMachine } from '../domain/statuses.js';
import { requireRole } from './authorize.js';
import { makeCreateRun, type RunDeps, visibleRun } from './runs.js';

export const replayBodySchema = z.strictObject({ reason: z.string().min(1).max(500) });
export type ReplayBody = z.infer<typeof replayBodySchema>;

/**
 * POST /v1/runs/{id}/replay (seed 004 section 7).
 * Input: the caller, a finished run of their tenant and a reason. Output: the new run and `replayOf`.
 * Steps: a new run of the same runbook version (so the same digest) with the same inputs and
 * priority, `replayOf` set, started like any run; then `run.replayed` on the original, naming it.
 */
export function makeReplayRun(deps: Omit<RunDeps, 'callbacks'>) {
  const createRun = makeCreateRun(deps);
  return async function replayRun(principal: Principal, runId: string, body: ReplayBody) {
    requireRole(principal, ['operator', 'admin'], 'replaying a run');
    const { run } = await visibleRun(deps.runs, principal, runId);
    if (!runStateMachine.isTerminal(run.status))
      throw new ConflictError(`run '${runId}' is ${run.status}; only a finished run is replayed`);
    const created = await createRun({
      principal,
      body: { runbookId: run.runbookId, version: run.runbookVersion, inputs: run.inputs, priority: run.priority },
      replayOf: runId,
    });
    const now = deps.clock.now().toISOString();
    await deps.runs.mutate(runId, () => ({
      events: [
        {
          eventId: randomUUID(),
          type: 'run.replayed',
          timestamp: now,
          payload: { replayRunId: created.runId, reason: body.reason, requestedBy: principal.subject },
          meta: {},
        },
      ],
    }));
    return { runId: created.runId, replayOf: runId, status: created.status };
  };
}

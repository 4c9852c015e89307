import { randomUUID } from 'node:crypto';
import type { Principal, Run } from '../domain/entities.js';
import { ConflictError } from '../domain/errors.js';
import { requireRole } from './authorize.js';
import type { RunStore } from './ports/runs.js';
import type { Clock, RunbookStore } from './ports.js';
import { runbookOf, visibleRun } from './runs.js';

/** Why an incident was raised on a run (seed 004's `Incident` state). */
export type IncidentCause =
  { readonly kind: 'run_failed' } | { readonly kind: 'breaker_opened'; readonly runbookId: string };

/** Tells people of an incident; an adapter that cannot deliver logs and carries on. */
export interface IncidentAlerts {
  raised(run: Run, cause: IncidentCause): Promise<void>;
}

export interface IncidentDeps {
  readonly runs: RunStore;
  readonly runbooks: RunbookStore;
  readonly clock: Clock;
  readonly alerts?: IncidentAlerts;
}

export function makeIncidents(deps: IncidentDeps) {
  /**
   * Flags the run with an incident and appends `run.incident` in the same transaction, then
   * alerts. A run holds one incident: raising it again changes nothing and alerts nobody.
   * Output: whether this call raised it.
   */
  async function raise(runId: string, cause: IncidentCause): Promise<boolean> {
    const now = deps.clock.now().toISOString();
    const committed = await deps.runs.mutate(runId, (record) =>
      record.run.incident
        ? undefined
        : {
            run: { incident: { raisedAt: now, reason: cause.kind }, updatedAt: now },
            events: [
              {
                eventId: randomUUID(),
                type: 'run.incident',
                timestamp: now,
                payload: { ...cause, ...(record.run.error && { error: record.run.error }) },
                meta: {},
              },
            ],
          },
    );
    if (!committed) return false;
    await deps.alerts?.raised(committed.record.run, cause);
    return true;
  }

  /** A run ended `failed`: its runbook may ask for an incident (`escalate_on_failure: true`). */
  async function onRunFailed(runId: string): Promise<boolean> {
    const record = await deps.runs.load(runId);
    if (record?.run.status !== 'failed' || record.run.incident) return false;
    const runbook = await runbookOf(deps.runbooks, record.run);
    return runbook.escalate_on_failure === true ? raise(runId, { kind: 'run_failed' }) : false;
  }

  /**
   * An operator acknowledges a run's incident: the flag records who and when, with
   * `run.incident_acknowledged` naming the actor. 409 when the run has no incident or it was
   * already acknowledged.
   */
  async function acknowledge(principal: Principal, runId: string): Promise<NonNullable<Run['incident']>> {
    requireRole(principal, ['operator', 'admin'], 'acknowledging an incident');
    const record = await visibleRun(deps.runs, principal, runId);
    const now = deps.clock.now().toISOString();
    const check = (run: Run) => {
      if (!run.incident) throw new ConflictError(`run '${runId}' has no incident`);
      if (run.incident.acknowledgedAt)
        throw new ConflictError(
          `the incident on run '${runId}' was acknowledged by ${run.incident.acknowledgedBy ?? 'someone'}`,
        );
      return run.incident;
    };
    check(record.run);
    const committed = await deps.runs.mutate(runId, (current) => {
      const incident = check(current.run);
      return {
        run: { incident: { ...incident, acknowledgedAt: now, acknowledgedBy: principal.subject }, updatedAt: now },
        events: [
          {
            eventId: randomUUID(),
            type: 'run.incident_acknowledged',
            timestamp: now,
            payload: { actor: principal.subject, raisedAt: incident.raisedAt },
            meta: {},
          },
        ],
      };
    });
    // `check` throws inside the change when a concurrent call acknowledged first.
    const incident = committed?.record.run.incident;
    if (!incident) throw new ConflictError(`run '${runId}' has no incident`);
    return incident;
  }

  return { raise, onRunFailed, acknowledge };
}
export type Incidents = ReturnType<typeof makeIncidents>;

import type { Json } from '../domain/canonical.js';
import { StaleWriteError } from '../domain/errors.js';
import {
  BREAKER_DEFAULTS,
  type BreakerSettings,
  type BreakerState,
  breakerStateSchema,
  closedBreaker,
  probeWithdrawn,
  recordOutcome,
} from '../domain/admission/breaker.js';
import { breakerCell, controlLogEntry } from './admission-controls.js';
import type { AdmissionStore } from './ports/admission.js';
import type { Clock } from './ports.js';

/** A breaker's transition, with the run whose outcome (or admission, for half-open) moved it. */
export interface BreakerChanged {
  readonly tenantId: string;
  readonly runbookId: string;
  readonly state: BreakerState['state'];
  readonly runId: string;
}

export interface BreakerDeps {
  readonly admission: AdmissionStore;
  readonly clock: Clock;
  /** Threshold, window and cooldown of every breaker; seed 004's defaults when absent. */
  readonly settings?: BreakerSettings;
  /** Hears every transition (`circuit_breaker_state`, incidents). */
  readonly changed?: (change: BreakerChanged) => Promise<void> | void;
}

const asJson = (value: object) => JSON.parse(JSON.stringify(value)) as { [key: string]: Json };

/** Per-runbook circuit breakers (seed 004 section 4.4): counting ended runs, and their transitions. */
export function makeBreakers(deps: BreakerDeps) {
  /** Tells whoever listens (metrics, incidents) of a transition; a listener's failure does not undo it. */
  async function tellBreaker(tenantId: string, runbookId: string, state: BreakerState['state'], runId: string) {
    await deps.changed?.({ tenantId, runbookId, state, runId });
  }

  /** Counts an ended run in its runbook's breaker; a transition is logged as a control change. */
  async function countOutcome(runbookId: string, tenantId: string, succeeded: boolean, runId: string): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const now = deps.clock.now();
      const [cell] = await deps.admission.cells(tenantId, breakerCell(runbookId));
      const was = cell ? breakerStateSchema.parse(cell.value) : undefined;
      const settings = deps.settings ?? BREAKER_DEFAULTS;
      const { next, change } = recordOutcome(was ?? closedBreaker(runbookId, now), succeeded, now, settings, runId);
      if (!change && was && next === was) return;
      try {
        await deps.admission.commit([
          {
            kind: 'putCell',
            tenantId,
            name: breakerCell(runbookId),
            value: asJson(next),
            expect: was ? { field: 'updatedAt', equals: was.updatedAt } : 'absent',
          },
          ...(change
            ? [controlLogEntry(tenantId, now.toISOString(), `breaker.${change}`, 'capstan', { runbookId, runId })]
            : []),
        ]);
        if (change) await tellBreaker(tenantId, runbookId, next.state, runId);
        return;
      } catch (error) {
        if (!(error instanceof StaleWriteError)) throw error;
      }
    }
  }

  /** A cancelled probe says nothing of the runbook's health: the breaker lets the next run probe instead. */
  async function withdrawProbe(runbookId: string, tenantId: string, runId: string): Promise<void> {
    const [cell] = await deps.admission.cells(tenantId, breakerCell(runbookId));
    const was = cell ? breakerStateSchema.parse(cell.value) : undefined;
    const next = was && probeWithdrawn(was, runId, deps.clock.now());
    if (!was || !next) return;
    try {
      await deps.admission.commit([
        {
          kind: 'putCell',
          tenantId,
          name: breakerCell(runbookId),
          value: asJson(next),
          expect: { field: 'updatedAt', equals: was.updatedAt },
        },
      ]);
    } catch (error) {
      // Someone else moved the breaker meanwhile (a reset): theirs stands.
      if (!(error instanceof StaleWriteError)) throw error;
    }
  }

  return { tellBreaker, countOutcome, withdrawProbe };
}

import type { RunEvent } from '../domain/events.js';
import type { RunStatus } from '../domain/statuses.js';
import type { RunEnding } from './admission.js';

/** Runs whose runbook a stream consumer remembers: its recent runs. */
const REMEMBERED = 1000;

const ENDED_AS: Readonly<Record<string, RunStatus>> = {
  'run.succeeded': 'succeeded',
  'run.failed': 'failed',
  'run.cancelled': 'cancelled',
};

/**
 * What a stream consumer learns of runs from their events: `run.created` names the run's runbook,
 * and a run's last event says how it ended; with both, the end needs no read of the run.
 */
export function makeRunEndings() {
  const runbookOf = new Map<string, string>();
  return {
    /** Notes what an appended event says of its run. */
    observe(event: Pick<RunEvent, 'runId' | 'type' | 'payload'>): void {
      if (event.type !== 'run.created' || typeof event.payload.runbookId !== 'string') return;
      if (runbookOf.size >= REMEMBERED) runbookOf.delete(runbookOf.keys().next().value ?? '');
      runbookOf.set(event.runId, event.payload.runbookId);
    },
    /** How the run of an ending event ended, when its creation was seen; else undefined. */
    endingOf(event: Pick<RunEvent, 'runId' | 'type' | 'payload'>): RunEnding | undefined {
      const status = ENDED_AS[event.type];
      const runbookId = runbookOf.get(event.runId);
      if (!status || runbookId === undefined) return undefined;
      runbookOf.delete(event.runId);
      const error = event.payload.error;
      const code =
        error !== null && typeof error === 'object' && !Array.isArray(error) && typeof error.code === 'string'
          ? error.code
          : undefined;
      return { status, runbookId, ...(code !== undefined && { error: { code } }) };
    },
  };
}

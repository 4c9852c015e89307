import type { DynamoDBStreamEvent } from 'aws-lambda';
import { admission, incidents } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';
import { appendedEvents } from '../shared/adapters/dynamodb/stream-records.js';
import { makeRunEndings } from '../shared/app/run-endings.js';

const { logger, observe } = lambdaTelemetry('capstan-admitter');
const admit = admission();
const incident = incidents();
const ENDINGS = new Set(['run.succeeded', 'run.failed', 'run.cancelled']);
const endings = makeRunEndings();

/**
 * The backlog admitter. On the event log's stream it acts when a run ends (incidents, the
 * runbook's breaker, freed capacity, and runs waiting on it); on its schedule it admits whatever time made eligible (windows, throttles,
 * breaker cooldowns).
 */
export const handler = observe(
  async (event: Partial<DynamoDBStreamEvent> | undefined): Promise<{ admitted: number }> => {
    if (!event?.Records) return { admitted: await admit.admitBacklog() };
    const appended = appendedEvents(
      event.Records,
      (position, message) => logger.warn('a stream record is not an event; skipped', { position, message }),
      (type) => type === 'run.created' || ENDINGS.has(type),
    );
    for (const { event: appendedEvent } of appended) {
      const { runId, tenantId, type } = appendedEvent;
      endings.observe(appendedEvent);
      if (!ENDINGS.has(type)) continue;
      try {
        // A run that failed for good on a runbook that escalates raises its incident.
        if (type === 'run.failed') await incident.onRunFailed(runId);
      } catch (error) {
        logger.error('raising an incident failed', { runId, error: (error as Error).message });
      }
      try {
        await admit.onRunEnded(runId, tenantId, endings.endingOf(appendedEvent));
      } catch (error) {
        // The schedule's pass and the reconciler pick up what this one missed; the stream moves on.
        logger.error('admission after a run ended failed', { runId, error: (error as Error).message });
      }
    }
    return { admitted: 0 };
  },
);

import type { EventBridgeEvent } from 'aws-lambda';
import { z } from 'zod';
import type { IngestResult } from '../shared/app/intake.js';
import { CapstanError } from '../shared/domain/errors.js';
import { ticketEventSchema } from '../shared/domain/intake/ticket.js';
import { intakeDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-ticket-ingest');

const { ingest } = intakeDeps();

const ticketEnvelope = z.object({ id: z.string(), 'detail-type': z.literal('Ticket'), detail: ticketEventSchema });

/**
 * A `Ticket` event from the bus becomes a run. What no retry can change (no rule matches, the
 * ticket has an active run, the runbook is missing) is recorded by the use case and not retried;
 * a malformed event or a failure of ours is thrown, so Lambda retries it and then keeps it in the
 * function's dead-letter queue.
 */
export const handler = observe(
  async (event: EventBridgeEvent<string, unknown>): Promise<IngestResult | { outcome: 'refused' }> => {
    const parsed = ticketEnvelope.safeParse(event);
    if (!parsed.success) {
      logger.error('ticket event is not valid', { eventId: event.id, issues: parsed.error.issues });
      throw new Error(`ticket event ${event.id} is not valid: ${parsed.error.issues[0]?.message ?? ''}`);
    }
    try {
      const result = await ingest(parsed.data.detail, 'eventbridge');
      logger.info('ticket event ingested', { eventId: event.id, ticketId: parsed.data.detail.id, ...result });
      return result;
    } catch (error) {
      if (error instanceof CapstanError) return { outcome: 'refused' };
      throw error;
    }
  },
);

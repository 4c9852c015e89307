import { z } from 'zod';
import { ConflictError } from '../errors.js';
import { storableTextSchema } from '../storable.js';

/** A scalar a ticket field may hold; lists keep their order (labels, components). */
const fieldValueSchema = z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]);

/**
 * A ticket event as Capstan reads it (brief, "Intake"): the EventBridge detail of a `Ticket`
 * event, and the generic webhook body. `eventId` tells two deliveries of one event apart from two
 * events on one ticket; when a system sends none, the event's content stands for it.
 */
export const ticketEventSchema = z.strictObject({
  id: storableTextSchema.min(1).max(200),
  source: storableTextSchema.min(1).max(100),
  type: storableTextSchema.min(1).max(100),
  priority: storableTextSchema.min(1).max(50).optional(),
  fields: z.record(z.string().max(200), fieldValueSchema).default({}),
  eventId: storableTextSchema.min(1).max(200).optional(),
});
export type TicketEvent = z.infer<typeof ticketEventSchema>;
export type TicketFieldValue = z.infer<typeof fieldValueSchema>;

/** A ticket already has an active run: a second is refused, naming the first (seed 000). */
export class TicketBusyError extends ConflictError {
  constructor(
    readonly ticketId: string,
    readonly activeRunId: string,
  ) {
    super(`ticket '${ticketId}' already has an active run: ${activeRunId}`, { ticketId, activeRunId });
  }
}

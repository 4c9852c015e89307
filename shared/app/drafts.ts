import { randomUUID } from 'node:crypto';
import type { Json } from '../domain/canonical.js';
import type { EventDraft } from '../domain/events.js';

/** An event for a run's log, with a fresh id; the store gives it its seq and hashes on append. */
export const draft = (
  type: EventDraft['type'],
  now: string,
  payload: Record<string, Json>,
  more: Partial<EventDraft> = {},
): EventDraft => ({ eventId: randomUUID(), type, timestamp: now, payload, meta: {}, ...more });

import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { type AppendedEvent, LIFECYCLE_TYPES, makePublishLifecycle } from '../shared/app/lifecycle.js';
import type { EventType } from '../shared/domain/events.js';
import { appendedEvents } from '../shared/adapters/dynamodb/stream-records.js';
import { lifecycleDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-lifecycle-publisher');

const publish = makePublishLifecycle(lifecycleDeps());

/**
 * The event log's stream, beside the broadcaster: run lifecycle events go out on the bus. A
 * refused publication reports its record, so the mapping retries from there, in order.
 */
export const handler = observe(async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const appended = appendedEvents(
    event.Records,
    (position, message) => logger.warn('a stream record is not an event; skipped', { position, message }),
    (type) => LIFECYCLE_TYPES.has(type as EventType),
  ).map(({ event: e, position }): AppendedEvent => ({
    runId: e.runId,
    tenantId: e.tenantId,
    seq: e.seq,
    type: e.type,
    eventId: e.eventId,
    timestamp: e.timestamp,
    payload: e.payload,
    position,
  }));
  const retryFrom = await publish(appended);
  return { batchItemFailures: retryFrom === undefined ? [] : [{ itemIdentifier: retryFrom }] };
});

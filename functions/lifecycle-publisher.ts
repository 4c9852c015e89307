import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { type AppendedEvent, makePublishLifecycle } from '../shared/app/lifecycle.js';
import { lifecycleDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { observe } = lambdaTelemetry('capstan-lifecycle-publisher');

const publish = makePublishLifecycle(lifecycleDeps());

/**
 * The event log's stream, beside the broadcaster: run lifecycle events go out on the bus. A
 * refused publication reports its record, so the mapping retries from there, in order.
 */
export const handler = observe(async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const appended = event.Records.flatMap((record): AppendedEvent[] => {
    const image = record.dynamodb?.NewImage;
    const fields = {
      runId: image?.runId?.S,
      tenantId: image?.tenantId?.S,
      seq: image?.seq?.N,
      type: image?.type?.S,
      eventId: image?.eventId?.S,
      timestamp: image?.timestamp?.S,
    };
    const { runId, tenantId, seq, type, eventId, timestamp } = fields;
    return record.eventName === 'INSERT' && runId && tenantId && seq && type && eventId && timestamp
      ? [
          {
            runId,
            tenantId,
            seq: Number(seq),
            type,
            eventId,
            timestamp,
            position: record.dynamodb?.SequenceNumber ?? '',
          },
        ]
      : [];
  });
  const retryFrom = await publish(appended);
  return { batchItemFailures: retryFrom === undefined ? [] : [{ itemIdentifier: retryFrom }] };
});

import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { makeLiveStream } from '../shared/app/live-stream.js';
import { liveStreamDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-broadcaster');
const live = makeLiveStream(liveStreamDeps());

/**
 * The event log's stream: each new event is delivered to the run's subscribers. A failure reports
 * the first record of the failed run, so the mapping retries from there (delivery is idempotent).
 */
export const handler = observe(async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => {
  const appended = event.Records.flatMap((record) => {
    const image = record.dynamodb?.NewImage;
    const runId = image?.runId?.S;
    const tenantId = image?.tenantId?.S;
    return record.eventName === 'INSERT' && runId && tenantId
      ? [{ runId, tenantId, sequenceNumber: record.dynamodb?.SequenceNumber ?? '' }]
      : [];
  });
  try {
    await live.broadcast(appended);
    return { batchItemFailures: [] };
  } catch (error) {
    logger.error('broadcast failed', { error: error as Error });
    const first = appended[0];
    return { batchItemFailures: first ? [{ itemIdentifier: first.sequenceNumber }] : [] };
  }
});

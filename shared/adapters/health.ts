import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import { DescribeStateMachineCommand } from '@aws-sdk/client-sfn';
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { s3Client, sfnClient, sqsClient } from './aws-clients.js';

export interface ComponentHealth {
  /** degraded: answering, but something needs a look (for example messages in a dead-letter queue). */
  readonly status: 'ok' | 'degraded' | 'unavailable';
  readonly latencyMs: number;
  readonly detail?: string;
}

/** Runs one probe: ok with its latency, or unavailable with the error's name. */
async function probe(
  check: () => Promise<string | undefined>,
  whenAnswered: 'degraded' | 'unavailable' = 'unavailable',
): Promise<ComponentHealth> {
  const started = performance.now();
  const latencyMs = () => Math.round(performance.now() - started);
  try {
    const problem = await check();
    return problem === undefined
      ? { status: 'ok', latencyMs: latencyMs() }
      : { status: whenAnswered, latencyMs: latencyMs(), detail: problem };
  } catch (error) {
    return { status: 'unavailable', latencyMs: latencyMs(), detail: (error as Error).name };
  }
}

export function checkTable(client: DynamoDBDocumentClient, tableName: string): Promise<ComponentHealth> {
  return probe(async () => {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    return Table?.TableStatus === 'ACTIVE' ? undefined : `table is ${Table?.TableStatus}`;
  });
}

/** A step queue answers; the detail carries its depth and its dead-letter queue's. */
export function checkQueue(queueName: string, deadLetterQueueName: string): Promise<ComponentHealth> {
  const depthOf = async (name: string) => {
    const { QueueUrl } = await sqsClient().send(new GetQueueUrlCommand({ QueueName: name }));
    const { Attributes } = await sqsClient().send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }),
    );
    return Number(Attributes?.ApproximateNumberOfMessages ?? 0);
  };
  return probe(async () => {
    const [depth, dead] = await Promise.all([depthOf(queueName), depthOf(deadLetterQueueName)]);
    return dead > 0 ? `${dead} message(s) in ${deadLetterQueueName} (queue depth ${depth})` : undefined;
  }, 'degraded');
}

export function checkStateMachine(stateMachineArn: string): Promise<ComponentHealth> {
  return probe(async () => {
    const { status } = await sfnClient().send(new DescribeStateMachineCommand({ stateMachineArn }));
    return status === 'ACTIVE' ? undefined : `state machine is ${status}`;
  });
}

export function checkBucket(bucket: string): Promise<ComponentHealth> {
  return probe(async () => {
    await s3Client().send(new HeadBucketCommand({ Bucket: bucket }));
    return undefined;
  });
}

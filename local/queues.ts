import type { AddressInfo } from 'node:net';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';
import { bindHost } from './bind-host.js';
import { withoutSdkLogging } from '../shared/adapters/aws-clients.js';
import { SANDBOX_PROFILES, type SandboxProfile } from '../shared/domain/sandbox-profiles.js';
import {
  DEAD_LETTER_RETENTION_SECONDS,
  deadLetterQueueName,
  RECEIVE_WAIT_SECONDS,
  priorityQueueName,
  STEP_QUEUE_RETENTION_SECONDS,
  stepQueueName,
} from '../shared/resources/queues.js';

export interface LocalQueuesOptions {
  readonly port: number;
  readonly prefix: string;
  readonly region: string;
  readonly evidenceBucket: string;
  readonly profiles?: readonly SandboxProfile[];
}

const ACCOUNT = '000000000000';

/** The running fauxqs server. */
export interface LocalQueues {
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * fauxqs in-process: SQS with a step queue, a priority queue and a dead-letter queue per sandbox profile,
 * configured from the same profile data as the CDK stack, and S3 with the evidence bucket.
 * Built from fauxqs' app rather than `startFauxqs`, which always listens on every interface;
 * the queues and the bucket are then created over the real SQS and S3 protocols.
 */
export async function startLocalQueues(options: LocalQueuesOptions): Promise<LocalQueues> {
  const profiles = options.profiles ?? Object.values(SANDBOX_PROFILES);
  const queues = profiles.flatMap((profile): Array<{ name: string; attributes: Record<string, string> }> => {
    const dlq = deadLetterQueueName(options.prefix, profile.name);
    const attributes = {
      VisibilityTimeout: String(profile.queueVisibilitySeconds),
      ReceiveMessageWaitTimeSeconds: String(RECEIVE_WAIT_SECONDS),
      MessageRetentionPeriod: String(STEP_QUEUE_RETENTION_SECONDS),
      RedrivePolicy: JSON.stringify({
        deadLetterTargetArn: `arn:aws:sqs:${options.region}:${ACCOUNT}:${dlq}`,
        maxReceiveCount: profile.maxReceiveCount,
      }),
    };
    return [
      { name: dlq, attributes: { MessageRetentionPeriod: String(DEAD_LETTER_RETENTION_SECONDS) } },
      { name: stepQueueName(options.prefix, profile.name), attributes },
      { name: priorityQueueName(options.prefix, profile.name), attributes },
    ];
  });
  const app = buildApp({ logger: false, defaultRegion: options.region });
  await app.listen({ port: options.port, host: bindHost() });
  const port = (app.server.address() as AddressInfo).port;
  const client = {
    endpoint: `http://127.0.0.1:${port}`,
    region: options.region,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  };
  const sqs = withoutSdkLogging(new SQSClient({ ...client, useQueueUrlAsEndpoint: false }));
  const s3 = withoutSdkLogging(new S3Client({ ...client, forcePathStyle: true }));
  try {
    // Each dead-letter queue comes before the queue whose redrive policy names it.
    for (const queue of queues) {
      await sqs.send(new CreateQueueCommand({ QueueName: queue.name, Attributes: queue.attributes }));
    }
    await s3.send(new CreateBucketCommand({ Bucket: options.evidenceBucket }));
  } catch (error) {
    await app.close();
    throw error;
  } finally {
    sqs.destroy();
    s3.destroy();
  }
  return { port, stop: () => app.close() };
}

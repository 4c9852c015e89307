import { startFauxqs, type FauxqsServer } from 'fauxqs';
import { SANDBOX_PROFILES, type SandboxProfile } from '../shared/domain/sandbox-profiles.js';
import {
  DEAD_LETTER_RETENTION_SECONDS,
  deadLetterQueueName,
  RECEIVE_WAIT_SECONDS,
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

/**
 * fauxqs in-process: SQS with one step queue and dead-letter queue per sandbox profile,
 * configured from the same profile data as the CDK stack, and S3 with the evidence bucket.
 */
export async function startLocalQueues(options: LocalQueuesOptions): Promise<FauxqsServer> {
  const profiles = options.profiles ?? Object.values(SANDBOX_PROFILES);
  const queues = profiles.flatMap((profile): Array<{ name: string; attributes: Record<string, string> }> => {
    const dlq = deadLetterQueueName(options.prefix, profile.name);
    return [
      { name: dlq, attributes: { MessageRetentionPeriod: String(DEAD_LETTER_RETENTION_SECONDS) } },
      {
        name: stepQueueName(options.prefix, profile.name),
        attributes: {
          VisibilityTimeout: String(profile.queueVisibilitySeconds),
          ReceiveMessageWaitTimeSeconds: String(RECEIVE_WAIT_SECONDS),
          MessageRetentionPeriod: String(STEP_QUEUE_RETENTION_SECONDS),
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: `arn:aws:sqs:${options.region}:${ACCOUNT}:${dlq}`,
            maxReceiveCount: profile.maxReceiveCount,
          }),
        },
      },
    ];
  });
  return startFauxqs({
    port: options.port,
    logger: false,
    defaultRegion: options.region,
    init: { region: options.region, queues, buckets: [options.evidenceBucket] },
  });
}

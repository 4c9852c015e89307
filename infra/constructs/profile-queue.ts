import { Duration } from 'aws-cdk-lib';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { SandboxProfile } from '../../shared/domain/sandbox-profiles.js';
import {
  DEAD_LETTER_RETENTION_SECONDS,
  deadLetterQueueName,
  priorityQueueName,
  RECEIVE_WAIT_SECONDS,
  STEP_QUEUE_RETENTION_SECONDS,
  stepQueueName,
} from '../../shared/resources/queues.js';

export interface ProfileQueueProps {
  readonly prefix: string;
  readonly profile: SandboxProfile;
  readonly encryptionKey: IKey;
}

/**
 * A sandbox profile's step queue, its priority queue (the commands of `high` and `emergency`
 * runs, which workers receive first) and the dead-letter queue behind both; all encrypted and
 * TLS-only.
 */
export class ProfileQueue extends Construct {
  public readonly queue: Queue;
  public readonly priorityQueue: Queue;
  public readonly deadLetterQueue: Queue;
  /** The queues a profile's commands are sent to and received from. */
  public readonly stepQueues: readonly Queue[];

  constructor(scope: Construct, id: string, props: ProfileQueueProps) {
    super(scope, id);
    const { profile } = props;
    this.deadLetterQueue = new Queue(this, 'Dlq', {
      queueName: deadLetterQueueName(props.prefix, profile.name),
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: props.encryptionKey,
      enforceSSL: true,
      retentionPeriod: Duration.seconds(DEAD_LETTER_RETENTION_SECONDS),
    });
    const stepQueue = (id: string, queueName: string) =>
      new Queue(this, id, {
        queueName,
        encryption: QueueEncryption.KMS,
        encryptionMasterKey: props.encryptionKey,
        enforceSSL: true,
        visibilityTimeout: Duration.seconds(profile.queueVisibilitySeconds),
        receiveMessageWaitTime: Duration.seconds(RECEIVE_WAIT_SECONDS),
        retentionPeriod: Duration.seconds(STEP_QUEUE_RETENTION_SECONDS),
        deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: profile.maxReceiveCount },
      });
    this.queue = stepQueue('Queue', stepQueueName(props.prefix, profile.name));
    this.priorityQueue = stepQueue('PriorityQueue', priorityQueueName(props.prefix, profile.name));
    this.stepQueues = [this.queue, this.priorityQueue];
  }
}

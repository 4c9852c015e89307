import { Duration } from 'aws-cdk-lib';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { SandboxProfile } from '../../shared/domain/sandbox-profiles.js';
import {
  DEAD_LETTER_RETENTION_SECONDS,
  deadLetterQueueName,
  RECEIVE_WAIT_SECONDS,
  STEP_QUEUE_RETENTION_SECONDS,
  stepQueueName,
} from '../../shared/resources/queues.js';

export interface ProfileQueueProps {
  readonly prefix: string;
  readonly profile: SandboxProfile;
  readonly encryptionKey: IKey;
}

/** A sandbox profile's step queue and its dead-letter queue, both encrypted and TLS-only. */
export class ProfileQueue extends Construct {
  public readonly queue: Queue;
  public readonly deadLetterQueue: Queue;

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
    this.queue = new Queue(this, 'Queue', {
      queueName: stepQueueName(props.prefix, profile.name),
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: props.encryptionKey,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(profile.queueVisibilitySeconds),
      receiveMessageWaitTime: Duration.seconds(RECEIVE_WAIT_SECONDS),
      retentionPeriod: Duration.seconds(STEP_QUEUE_RETENTION_SECONDS),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: profile.maxReceiveCount },
    });
  }
}

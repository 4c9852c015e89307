import { Duration } from 'aws-cdk-lib';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { SandboxProfile } from '../../shared/domain/sandbox-profiles.js';
import { deadLetterQueueName, stepQueueName } from '../../shared/resources/queues.js';

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
      retentionPeriod: Duration.days(14),
    });
    this.queue = new Queue(this, 'Queue', {
      queueName: stepQueueName(props.prefix, profile.name),
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: props.encryptionKey,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(profile.queueVisibilitySeconds),
      receiveMessageWaitTime: Duration.seconds(20),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: profile.maxReceiveCount },
    });
  }
}

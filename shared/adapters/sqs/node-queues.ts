import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SandboxProfile } from '../../domain/sandbox-profiles.js';
import {
  deadLetterQueueName,
  nodeQueueName,
  RECEIVE_WAIT_SECONDS,
  STEP_QUEUE_RETENTION_SECONDS,
} from '../../resources/queues.js';
import { makeQueueUrls } from './command-queue.js';

export interface NodeQueueSpec {
  readonly prefix: string;
  readonly tenantId: string;
  readonly nodeId: string;
  /** The agent's sandbox profile: its visibility timeout and dead-letter queue are the node queue's. */
  readonly profile: SandboxProfile;
}

/**
 * Creates an agent node's own step queue, or finds it (CreateQueue is idempotent for the same
 * attributes), and resolves its URL. It redrives to the profile's dead-letter queue, so a poison
 * command for a node lands where the profile's do, and it is encrypted by SQS (SSE-SQS), so the
 * dispatcher needs no key grant per node. It is left in place when the agent stops: a worker
 * that registers the node again receives what was sent meanwhile, within the retention period.
 */
export async function ensureNodeQueue(client: SQSClient, spec: NodeQueueSpec): Promise<string> {
  const dlqUrl = await makeQueueUrls(client)(deadLetterQueueName(spec.prefix, spec.profile.name));
  const { Attributes } = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }),
  );
  const dlqArn = Attributes?.QueueArn;
  if (dlqArn === undefined) throw new Error(`queue ${dlqUrl} has no ARN`);
  const { QueueUrl } = await client.send(
    new CreateQueueCommand({
      QueueName: nodeQueueName(spec.prefix, spec.tenantId, spec.nodeId),
      Attributes: {
        VisibilityTimeout: String(spec.profile.queueVisibilitySeconds),
        ReceiveMessageWaitTimeSeconds: String(RECEIVE_WAIT_SECONDS),
        MessageRetentionPeriod: String(STEP_QUEUE_RETENTION_SECONDS),
        SqsManagedSseEnabled: 'true',
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: spec.profile.maxReceiveCount }),
      },
      tags: { 'capstan:tenant': spec.tenantId, 'capstan:node': spec.nodeId.slice(0, 256) },
    }),
  );
  if (!QueueUrl) throw new Error(`node queue for ${spec.nodeId} has no URL`);
  return QueueUrl;
}

import { GetQueueAttributesCommand, QueueDoesNotExist, type SQSClient } from '@aws-sdk/client-sqs';
import type { QueueDepths } from '../../app/dashboard.js';
import type { SandboxProfileName } from '../../domain/sandbox-profiles.js';
import { stepQueueName } from '../../resources/queues.js';
import { makeQueueUrls } from './command-queue.js';

/**
 * Queue depth per profile from SQS `ApproximateNumberOfMessages` (visible messages: commands no
 * worker has received yet). A profile this deployment has no queue for is left out.
 */
export function makeSqsQueueDepths(
  client: SQSClient,
  prefix: string,
  profiles: readonly SandboxProfileName[],
): QueueDepths {
  const urlOf = makeQueueUrls(client);
  const depthOf = async (profile: SandboxProfileName): Promise<[SandboxProfileName, number] | undefined> => {
    try {
      const QueueUrl = await urlOf(stepQueueName(prefix, profile));
      const { Attributes } = await client.send(
        new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }),
      );
      return [profile, Number(Attributes?.ApproximateNumberOfMessages ?? 0)];
    } catch (error) {
      if (error instanceof QueueDoesNotExist) return undefined;
      throw error;
    }
  };
  return {
    async depths() {
      const found = await Promise.all(profiles.map(depthOf));
      return new Map(found.filter((entry) => entry !== undefined));
    },
  };
}

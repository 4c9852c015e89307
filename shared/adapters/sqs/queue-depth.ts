import { GetQueueAttributesCommand, QueueDoesNotExist, type SQSClient } from '@aws-sdk/client-sqs';
import type { QueueDepth, QueueDepths } from '../../app/ports/capacity.js';
import type { SandboxProfileName } from '../../domain/sandbox-profiles.js';
import { priorityQueueName, stepQueueName } from '../../resources/queues.js';
import { makeQueueUrls } from './command-queue.js';

/** A profile's depth, its step and priority queues together, from `GetQueueAttributes` (approximate, as SQS counts it). */
export function makeSqsQueueDepth(client: SQSClient, prefix: string): QueueDepth {
  const urlOf = makeQueueUrls(client);
  const depthOf = async (name: string) => {
    const { Attributes } = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: await urlOf(name),
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return {
      visible: Number(Attributes?.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
    };
  };
  return {
    async depth(profile) {
      const [steps, priority] = await Promise.all([
        depthOf(stepQueueName(prefix, profile)),
        depthOf(priorityQueueName(prefix, profile)),
      ]);
      return { visible: steps.visible + priority.visible, inFlight: steps.inFlight + priority.inFlight };
    },
  };
}

/**
 * Messages waiting in each profile's queue (`ApproximateNumberOfMessages`), from the same reads;
 * a profile this deployment has no queue for is left out.
 */
export function makeSqsQueueDepths(
  client: SQSClient,
  prefix: string,
  profiles: readonly SandboxProfileName[],
): QueueDepths {
  const queue = makeSqsQueueDepth(client, prefix);
  const visibleIn = async (profile: SandboxProfileName): Promise<[SandboxProfileName, number] | undefined> => {
    try {
      return [profile, (await queue.depth(profile)).visible];
    } catch (error) {
      if (error instanceof QueueDoesNotExist) return undefined;
      throw error;
    }
  };
  return {
    async depths() {
      const found = await Promise.all(profiles.map(visibleIn));
      return new Map(found.filter((entry) => entry !== undefined));
    },
  };
}

import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { QueueDepth } from '../../app/ports/capacity.js';
import { stepQueueName } from '../../resources/queues.js';
import { makeQueueUrls } from './command-queue.js';

/** A profile queue's depth from `GetQueueAttributes` (approximate, as SQS counts it). */
export function makeSqsQueueDepth(client: SQSClient, prefix: string): QueueDepth {
  const urlOf = makeQueueUrls(client);
  return {
    async depth(profile) {
      const { Attributes } = await client.send(
        new GetQueueAttributesCommand({
          QueueUrl: await urlOf(stepQueueName(prefix, profile)),
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      return {
        visible: Number(Attributes?.ApproximateNumberOfMessages ?? 0),
        inFlight: Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
      };
    },
  };
}

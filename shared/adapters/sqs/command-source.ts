import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { CommandSource, ReceivedCommand } from '../../app/worker-ports.js';
import { TRACE_ATTRIBUTE, traceHeaderOf } from './trace-attributes.js';

export interface SqsCommandSourceOptions {
  /** Long-poll wait of one receive on the step queue; also how long a priority command may wait behind it. @default 5 */
  readonly waitSeconds?: number;
  /** The profile's priority queue, received from first (agent nodes have none). */
  readonly priorityQueueUrl?: string;
}

/**
 * A profile's step queues as a worker's command source, as many messages per receive as the
 * worker has free slots (ten at most, SQS's bound): the priority queue first, without waiting,
 * then a long poll on the step queue. A priority command that
 * arrives during that poll waits at most `waitSeconds`; a received message is never put back.
 */
export function makeSqsCommandSource(
  sqs: SQSClient,
  queueUrl: string,
  options: SqsCommandSourceOptions = {},
): CommandSource {
  /** Which queue each received message came from, until it is deleted or released. */
  const from = new Map<string, string>();

  async function receiveFrom(url: string, waitSeconds: number, max: number): Promise<ReceivedCommand[]> {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: Math.min(10, Math.max(1, Math.floor(max))),
        WaitTimeSeconds: waitSeconds,
        MessageAttributeNames: [TRACE_ATTRIBUTE],
      }),
    );
    return Messages.flatMap((m: Message) => {
      if (m.ReceiptHandle === undefined) return [];
      from.set(m.ReceiptHandle, url);
      const traceHeader = traceHeaderOf(m);
      return [
        {
          id: m.MessageId ?? '?',
          body: m.Body ?? 'null',
          handle: m.ReceiptHandle,
          ...(traceHeader !== undefined && { traceHeader }),
        },
      ];
    });
  }

  const urlOf = (command: ReceivedCommand) => {
    const url = from.get(command.handle) ?? queueUrl;
    from.delete(command.handle);
    return url;
  };

  return {
    async receive(max = 1) {
      if (options.priorityQueueUrl !== undefined) {
        const urgent = await receiveFrom(options.priorityQueueUrl, 0, max);
        if (urgent.length > 0) return urgent;
      }
      return receiveFrom(queueUrl, options.waitSeconds ?? 5, max);
    },

    async delete(command) {
      await sqs.send(new DeleteMessageCommand({ QueueUrl: urlOf(command), ReceiptHandle: command.handle }));
    },

    async release(command) {
      // Visible again at once, for another worker.
      await sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: urlOf(command),
          ReceiptHandle: command.handle,
          VisibilityTimeout: 0,
        }),
      );
    },
  };
}

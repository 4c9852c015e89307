import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { CommandSource } from '../../app/worker-ports.js';
import { TRACE_ATTRIBUTE, traceHeaderOf } from './trace-attributes.js';

export interface SqsCommandSourceOptions {
  /** Long-poll wait of one receive. @default 5 */
  readonly waitSeconds?: number;
}

/** A profile's step queue as a worker's command source: one message per receive. */
export function makeSqsCommandSource(
  sqs: SQSClient,
  queueUrl: string,
  options: SqsCommandSourceOptions = {},
): CommandSource {
  return {
    async receive() {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 1,
          WaitTimeSeconds: options.waitSeconds ?? 5,
          MessageAttributeNames: [TRACE_ATTRIBUTE],
        }),
      );
      return Messages.flatMap((m) => {
        if (m.ReceiptHandle === undefined) return [];
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
    },

    async delete(command) {
      await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: command.handle }));
    },

    async release(command) {
      // Visible again at once, for another worker.
      await sqs.send(
        new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: command.handle, VisibilityTimeout: 0 }),
      );
    },
  };
}

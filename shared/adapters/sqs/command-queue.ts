import { GetQueueUrlCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { CommandQueue } from '../../app/interpreter.js';
import type { StepCommand } from '../../domain/messages.js';
import type { SandboxProfileName } from '../../domain/sandbox-profiles.js';
import { stepQueueName } from '../../resources/queues.js';

/** Resolves a queue's URL once per process. */
export function makeQueueUrls(client: SQSClient) {
  const urls = new Map<string, Promise<string>>();
  return (name: string): Promise<string> => {
    let url = urls.get(name);
    if (!url) {
      url = client.send(new GetQueueUrlCommand({ QueueName: name })).then(({ QueueUrl }) => {
        if (!QueueUrl) throw new Error(`queue ${name} has no URL`);
        return QueueUrl;
      });
      urls.set(name, url);
      url.catch(() => urls.delete(name));
    }
    return url;
  };
}

/** Step commands to the profile's queue, ten per SendMessageBatch; a partial failure is an error. */
export function makeSqsCommandQueue(client: SQSClient, prefix: string): CommandQueue {
  const urlOf = makeQueueUrls(client);
  return {
    async send(profile: SandboxProfileName, commands: readonly StepCommand[]) {
      const QueueUrl = await urlOf(stepQueueName(prefix, profile));
      for (let i = 0; i < commands.length; i += 10) {
        const batch = commands.slice(i, i + 10);
        const { Failed = [] } = await client.send(
          new SendMessageBatchCommand({
            QueueUrl,
            Entries: batch.map((command, j) => ({ Id: String(j), MessageBody: JSON.stringify(command) })),
          }),
        );
        if (Failed.length > 0)
          throw new Error(`${Failed.length} command(s) not queued: ${Failed.map((f) => f.Message).join('; ')}`);
      }
    },
  };
}

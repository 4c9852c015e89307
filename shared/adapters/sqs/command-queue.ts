import {
  GetQueueUrlCommand,
  QueueDoesNotExist,
  SendMessageBatchCommand,
  type SQSClient,
  SQSServiceException,
} from '@aws-sdk/client-sqs';
import type { CommandQueue, RejectedCommand } from '../../app/ports/interpreter.js';
import { type StepCommand, urgent } from '../../domain/messages.js';
import type { SandboxProfileName } from '../../domain/sandbox-profiles.js';
import {
  MAX_BATCH_BYTES,
  MAX_COMMAND_BYTES,
  nodeQueueName,
  priorityQueueName,
  stepQueueName,
} from '../../resources/queues.js';
import { TransientQueueError } from '../../app/dispatch-errors.js';
import { queueSafeJson } from './message-body.js';
import { traceAttributes } from './trace-attributes.js';

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

export interface SqsCommandQueueOptions {
  /** Sends of entries the queue failed on its side (after the SDK's own retries). @default 4 */
  readonly attempts?: number;
  /** First back-off between those sends, doubled each time, with full jitter. @default 200 */
  readonly backoffMs?: number;
}

interface Entry {
  readonly executionId: string;
  readonly body: string;
}

/** Whether an SDK error may pass if the same request is sent again (throttling, 5xx, network). */
function transient(error: unknown): boolean {
  if (!(error instanceof SQSServiceException)) return true;
  return error.$fault === 'server' || error.$retryable !== undefined || /Throttl|RequestThrottled/.test(error.name);
}

/** Groups entries into batches of at most ten and `MAX_BATCH_BYTES`. */
function batches(entries: readonly Entry[]): Entry[][] {
  const out: Entry[][] = [];
  let current: Entry[] = [];
  let bytes = 0;
  for (const entry of entries) {
    const size = Buffer.byteLength(entry.body);
    if (current.length === 10 || (current.length > 0 && bytes + size > MAX_BATCH_BYTES)) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(entry);
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/**
 * Step commands to the profile's queue with SendMessageBatch. A command the queue can never take
 * (too large, refused contents, any sender fault) is resolved as rejected, not thrown, so the
 * dispatcher fails its step instead of trying again; entries the queue failed on its side are
 * sent again with back-off, and a queue that stays unavailable is a `TransientQueueError`.
 */
export function makeSqsCommandQueue(
  client: SQSClient,
  prefix: string,
  options: SqsCommandQueueOptions = {},
): CommandQueue {
  const urlOf = makeQueueUrls(client);
  const attempts = options.attempts ?? 4;
  const backoffMs = options.backoffMs ?? 200;

  /** Sends one batch; resolves what it rejected for good and what may pass on another try. */
  async function sendBatch(
    QueueUrl: string,
    batch: readonly Entry[],
  ): Promise<{ rejected: RejectedCommand[]; retry: Entry[]; cause?: string }> {
    try {
      const { Failed = [] } = await client.send(
        new SendMessageBatchCommand({
          QueueUrl,
          Entries: batch.map((entry, j) => ({ Id: String(j), MessageBody: entry.body, ...traceAttributes() })),
        }),
      );
      const rejected: RejectedCommand[] = [];
      const retry: Entry[] = [];
      for (const failure of Failed) {
        const entry = batch[Number(failure.Id)];
        if (!entry) continue;
        if (failure.SenderFault === false) retry.push(entry);
        else
          rejected.push({
            executionId: entry.executionId,
            code: failure.Code ?? 'QUEUE_REJECTED',
            message: failure.Message ?? 'the queue refused the command',
          });
      }
      const cause = Failed.find((f) => f.SenderFault === false)?.Message;
      return { rejected, retry, ...(cause !== undefined && { cause }) };
    } catch (error) {
      if (transient(error)) return { rejected: [], retry: [...batch], cause: (error as Error).message };
      // The request as a whole was refused: find the entries at fault by sending them one by one.
      if (batch.length > 1) {
        const parts = await Promise.all(batch.map((entry) => sendBatch(QueueUrl, [entry])));
        return {
          rejected: parts.flatMap((p) => p.rejected),
          retry: parts.flatMap((p) => p.retry),
          cause: parts.find((p) => p.cause !== undefined)?.cause,
        };
      }
      const [entry] = batch;
      const failure = error as SQSServiceException;
      return {
        rejected: entry ? [{ executionId: entry.executionId, code: failure.name, message: failure.message }] : [],
        retry: [],
      };
    }
  }

  /** Sends entries to one queue, again with back-off while the queue fails on its side. */
  async function sendTo(QueueUrl: string, entries: readonly Entry[]): Promise<RejectedCommand[]> {
    const rejected: RejectedCommand[] = [];
    let pending = [...entries];
    let cause: string | undefined;
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= attempts)
        throw new TransientQueueError(
          `${pending.length} command(s) not queued after ${attempts} attempts: ${cause ?? 'unknown'}`,
        );
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.random() * backoffMs * 2 ** (attempt - 1)));
      const results = await Promise.all(batches(pending).map((batch) => sendBatch(QueueUrl, batch)));
      rejected.push(...results.flatMap((r) => r.rejected));
      pending = results.flatMap((r) => r.retry);
      cause = results.find((r) => r.cause !== undefined)?.cause ?? cause;
    }
    return rejected;
  }

  /**
   * An agent node's queue, or a rejection for every entry when there is none: the agent never
   * registered (its worker creates the queue), so nothing could ever receive the command.
   */
  async function sendToNode(queueName: string, nodeId: string, entries: readonly Entry[]) {
    let QueueUrl: string;
    try {
      QueueUrl = await urlOf(queueName);
    } catch (error) {
      if (!(error instanceof QueueDoesNotExist)) throw error;
      return entries.map((entry): RejectedCommand => ({
        executionId: entry.executionId,
        code: 'NODE_QUEUE_MISSING',
        message: `agent node '${nodeId}' has no queue: no worker has registered it`,
      }));
    }
    return sendTo(QueueUrl, entries);
  }

  return {
    /**
     * Sends each command to where it must go: an agent node's command to that node's own queue
     * (only its worker receives from it), a `high` or `emergency` run's command to the profile's
     * priority queue, every other command to the profile's step queue.
     */
    async send(profile: SandboxProfileName, commands: readonly StepCommand[]) {
      const rejected: RejectedCommand[] = [];
      const byQueue = new Map<string, { nodeId?: string; entries: Entry[] }>();
      for (const command of commands) {
        let body = queueSafeJson(command);
        // A command just under the limit goes without the task token and chain head it may carry:
        // they only save its worker reads (the result then claims the completion).
        if (Buffer.byteLength(body) > MAX_COMMAND_BYTES && (command.taskToken ?? command.chainHead)) {
          const { taskToken: _token, chainHead: _head, ...plain } = command;
          body = queueSafeJson(plain);
        }
        const bytes = Buffer.byteLength(body);
        if (bytes > MAX_COMMAND_BYTES) {
          rejected.push({
            executionId: command.executionId,
            code: 'MESSAGE_TOO_LARGE',
            message: `the command is ${bytes} bytes; a queue message may carry at most ${MAX_COMMAND_BYTES}`,
          });
          continue;
        }
        const nodeId = command.target?.source === 'agent' ? command.target.id : undefined;
        const queue =
          nodeId !== undefined
            ? nodeQueueName(prefix, command.tenantId, nodeId)
            : urgent(command)
              ? priorityQueueName(prefix, profile)
              : stepQueueName(prefix, profile);
        const group = byQueue.get(queue) ?? { ...(nodeId !== undefined && { nodeId }), entries: [] };
        group.entries.push({ executionId: command.executionId, body });
        byQueue.set(queue, group);
      }
      const results = await Promise.all(
        [...byQueue].map(async ([queue, { nodeId, entries }]) =>
          nodeId === undefined ? sendTo(await urlOf(queue), entries) : sendToNode(queue, nodeId, entries),
        ),
      );
      return [...rejected, ...results.flat()];
    },
  };
}

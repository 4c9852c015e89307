import {
  GetQueueUrlCommand,
  SendMessageBatchCommand,
  type SendMessageBatchCommandInput,
  SQSClient,
  SQSServiceException,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { TransientQueueError } from '../../../shared/app/dispatch-errors.js';
import { makeSqsCommandQueue } from '../../../shared/adapters/sqs/command-queue.js';
import { queueSafeJson } from '../../../shared/adapters/sqs/message-body.js';
import type { StepCommand } from '../../../shared/domain/messages.js';

const sqs = mockClient(SQSClient);
const client = new SQSClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });

const command = (executionId: string, message: string = 'hi'): StepCommand => ({
  v: 1,
  executionId,
  runId: 'run-1',
  tenantId: 't',
  stepId: 's',
  kind: 'step',
  targetId: 'once',
  attempt: 1,
  idempotencyKey: `k-${executionId}`,
  backend: 'test',
  action: 'echo',
  params: { message },
  timeoutMs: 1000,
  secrets: [],
  sandboxProfile: 'dev-flex',
});

const serviceError = (name: string, fault: 'client' | 'server') =>
  new SQSServiceException({ name, $fault: fault, $metadata: {}, message: `${name} happened` });

const queue = () => makeSqsCommandQueue(client, 'capstan', { attempts: 3, backoffMs: 1 });
const bodies = (i: number) =>
  ((sqs.commandCalls(SendMessageBatchCommand)[i]?.args[0].input as SendMessageBatchCommandInput).Entries ?? []).map(
    (e) => e.MessageBody ?? '',
  );

beforeEach(() => {
  sqs.reset();
  sqs.on(GetQueueUrlCommand).resolves({ QueueUrl: 'http://queue/capstan-dev-flex-steps' });
});

describe('the SQS command queue', () => {
  it('writes every character outside printable ASCII as an escape that parses back to the same text', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const message = 'a\uFFFEb\u{1F680}c\u0007\uD800';
    expect(await queue().send('dev-flex', [command('e1', message)])).toEqual([]);
    const [body = ''] = bodies(0);
    expect(body).toMatch(/^[\x20-\x7e]*$/);
    expect((JSON.parse(body) as StepCommand).params.message).toBe(message);
    expect(queueSafeJson({ m: '\u00e9' })).toBe('{"m":"\\u00e9"}');
  });

  it('resolves a sender-fault entry as rejected and sends a server-fault entry again', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .resolvesOnce({
        Successful: [],
        Failed: [
          { Id: '0', SenderFault: true, Code: 'InvalidMessageContents', Message: 'Invalid characters found' },
          { Id: '1', SenderFault: false, Code: 'InternalError', Message: 'try again' },
        ],
      })
      .resolves({ Successful: [{ Id: '0', MessageId: 'm', MD5OfMessageBody: 'x' }], Failed: [] });
    const rejected = await queue().send('dev-flex', [command('e1'), command('e2')]);
    expect(rejected).toEqual([
      { executionId: 'e1', code: 'InvalidMessageContents', message: 'Invalid characters found' },
    ]);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(2);
    expect(bodies(1).map((b) => (JSON.parse(b) as StepCommand).executionId)).toEqual(['e2']);
  });

  it('refuses a command past the size limit without sending it', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const rejected = await queue().send('dev-flex', [command('big', 'x'.repeat(300_000)), command('small')]);
    expect(rejected).toEqual([expect.objectContaining({ executionId: 'big', code: 'MESSAGE_TOO_LARGE' })]);
    expect(bodies(0)).toHaveLength(1);
  });

  it('sends a command just under the limit without the task token and chain head that would take it over', async () => {
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const near = {
      ...command('near', 'x'.repeat(256 * 1024 - 600)),
      taskToken: 't'.repeat(1000),
      chainHead: { seq: 2, hash: 'h' },
    };
    const rejected = await queue().send('dev-flex', [near]);
    expect(rejected).toEqual([]);
    const [sent] = bodies(0).map((b) => JSON.parse(b) as StepCommand);
    expect(sent).toMatchObject({ executionId: 'near' });
    expect(sent?.taskToken).toBeUndefined();
    expect(sent?.chainHead).toBeUndefined();
  });

  it('finds the entry at fault when the queue refuses the whole batch', async () => {
    sqs
      .on(SendMessageBatchCommand)
      .rejectsOnce(serviceError('BatchRequestTooLong', 'client'))
      .resolvesOnce({ Successful: [], Failed: [] })
      .rejectsOnce(serviceError('InvalidParameterValue', 'client'));
    const rejected = await queue().send('dev-flex', [command('ok'), command('bad')]);
    expect(rejected).toEqual([
      { executionId: 'bad', code: 'InvalidParameterValue', message: 'InvalidParameterValue happened' },
    ]);
  });

  it('throws a transient error when the queue stays unavailable through every attempt', async () => {
    sqs.on(SendMessageBatchCommand).rejects(serviceError('ServiceUnavailable', 'server'));
    await expect(queue().send('dev-flex', [command('e1')])).rejects.toBeInstanceOf(TransientQueueError);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(3);
  });
});

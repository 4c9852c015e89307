import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { type LocalStack, LOCAL_NAMES } from '../../local/stack.js';
import { makeRunStore } from '../../shared/adapters/dynamodb/run-store.js';
import { makeWorkerStore } from '../../shared/adapters/dynamodb/worker-store.js';
import { makeSfnCallbacks } from '../../shared/adapters/sfn.js';
import { makeSqsCommandSource } from '../../shared/adapters/sqs/command-source.js';
import { makeRecoverLost } from '../../shared/app/recovery.js';
import { makeStepResults } from '../../shared/app/step-results.js';
import type { SandboxProfileName } from '../../shared/domain/sandbox-profiles.js';
import type { Backend } from '../../worker-container/backends/types.js';
import { Worker } from '../../worker-container/worker.js';

export interface RelayedWorkerOptions {
  /** The profile whose step queue is relayed (no stack worker should serve it). */
  readonly from: SandboxProfileName;
  /** The profile the in-test worker enforces. */
  readonly profile: SandboxProfileName;
  /** How many copies of each command the relay delivers. */
  readonly copies: number;
  readonly backends: readonly Backend[];
  readonly workerId: string;
}

/**
 * A worker in the test process fed by a relay from a profile's step queue, for deliveries the
 * stack would not make on its own: every command twice, or to a worker of another profile.
 */
export async function startRelayedWorker(stack: LocalStack, options: RelayedWorkerOptions) {
  const sqs = new SQSClient({ endpoint: stack.endpoints.SQS, region: 'us-east-1', useQueueUrlAsEndpoint: false });
  const { QueueUrl: source } = await sqs.send(new GetQueueUrlCommand({ QueueName: `capstan-${options.from}-steps` }));
  const { QueueUrl: relayed } = await sqs.send(new CreateQueueCommand({ QueueName: `test-relay-${options.workerId}` }));
  if (!source || !relayed) throw new Error('queue URLs missing');
  let relaying = true;
  const relay = (async () => {
    while (relaying) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: source, WaitTimeSeconds: 1, MaxNumberOfMessages: 10 }),
      );
      for (const m of Messages) {
        for (let i = 0; i < options.copies; i++)
          await sqs.send(new SendMessageCommand({ QueueUrl: relayed, MessageBody: m.Body }));
        await sqs.send(new DeleteMessageCommand({ QueueUrl: source, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  })();
  const doc = DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: stack.endpoints.DYNAMODB }));
  const runs = makeRunStore(doc, { state: LOCAL_NAMES.tables.state, events: LOCAL_NAMES.tables.events });
  const callbacks = makeSfnCallbacks(new SFNClient({ endpoint: stack.endpoints.SFN }));
  const worker = new Worker({
    workerId: options.workerId,
    profile: options.profile,
    registration: { hostname: 'test', pid: process.pid, environment: 'dev', backends: {}, groups: [], version: 'test' },
    workers: makeWorkerStore(doc, LOCAL_NAMES.tables.state),
    heartbeatMs: 1000,
    leaseMs: 30_000,
    commands: makeSqsCommandSource(sqs, relayed),
    runs,
    results: makeStepResults({ runs, callbacks, clock: { now: () => new Date() } }),
    recover: makeRecoverLost({ runs, callbacks }),
    backends: options.backends,
    secrets: { get: () => Promise.reject(new Error('no secrets here')) },
    log: () => undefined,
  });
  const working = worker.run();
  return {
    async stop() {
      relaying = false;
      await relay;
      await worker.stop();
      await working;
    },
  };
}

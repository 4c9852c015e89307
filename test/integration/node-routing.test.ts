import { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalQueues, startLocalQueues } from '../../local/queues.js';
import type { ReceivedCommand } from '../../shared/app/worker-ports.js';
import { makeQueueUrls, makeSqsCommandQueue } from '../../shared/adapters/sqs/command-queue.js';
import { makeSqsCommandSource } from '../../shared/adapters/sqs/command-source.js';
import { ensureNodeQueue } from '../../shared/adapters/sqs/node-queues.js';
import type { StepCommand } from '../../shared/domain/messages.js';
import { SANDBOX_PROFILES } from '../../shared/domain/sandbox-profiles.js';
import { nodeQueueName, priorityQueueName, stepQueueName } from '../../shared/resources/queues.js';
import { freePort } from '../support/local-dynamodb.js';

const region = 'us-east-1';
const profile = SANDBOX_PROFILES['dev-flex'];

const command = (
  executionId: string,
  target?: StepCommand['target'],
  priority?: StepCommand['priority'],
): StepCommand => ({
  v: 1,
  executionId,
  runId: 'run-1',
  tenantId: 'acme',
  stepId: 'restart',
  kind: 'step',
  targetId: target?.id ?? 'once',
  attempt: 1,
  idempotencyKey: `k-${executionId}`,
  backend: 'test',
  action: 'echo',
  params: { message: 'hi' },
  timeoutMs: 1000,
  secrets: [],
  sandboxProfile: 'dev-flex',
  ...(target && { target }),
  ...(priority && { priority }),
});
const agent = (id: string) => ({ id, source: 'agent' as const, attributes: {} });

/** Receives until the queue answers empty, deleting what came. */
async function drain(source: ReturnType<typeof makeSqsCommandSource>): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const got: ReceivedCommand[] = await source.receive();
    if (got.length === 0) return ids;
    for (const message of got) {
      ids.push((JSON.parse(message.body) as StepCommand).executionId);
      await source.delete(message);
    }
  }
}

describe('per-node routing on SQS (fauxqs)', () => {
  let fauxqs: LocalQueues;
  let sqs: SQSClient;

  beforeAll(async () => {
    fauxqs = await startLocalQueues({
      port: await freePort(),
      prefix: 'route',
      region,
      evidenceBucket: 'route-evidence',
      profiles: [profile],
    });
    sqs = new SQSClient({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      region,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      useQueueUrlAsEndpoint: false,
    });
  });
  afterAll(async () => {
    sqs?.destroy();
    await fauxqs?.stop();
  });

  it("delivers a command for node A to A's worker only, and untargeted commands to the profile queue", async () => {
    const spec = { prefix: 'route', tenantId: 'acme', profile };
    const [urlA, urlB] = await Promise.all([
      ensureNodeQueue(sqs, { ...spec, nodeId: 'web-a' }),
      ensureNodeQueue(sqs, { ...spec, nodeId: 'web-b' }),
    ]);
    // A second registration finds the same queue.
    expect(await ensureNodeQueue(sqs, { ...spec, nodeId: 'web-a' })).toBe(urlA);
    const sourceOf = (url: string) => makeSqsCommandSource(sqs, url, { waitSeconds: 0 });
    const profileUrl = await makeQueueUrls(sqs)(stepQueueName('route', 'dev-flex'));

    const rejected = await makeSqsCommandQueue(sqs, 'route').send('dev-flex', [
      command('for-a-1', agent('web-a')),
      command('untargeted'),
      command('declared', { id: 'db-1', source: 'declared', attributes: { host: 'db' } }),
      command('for-a-2', agent('web-a')),
    ]);

    expect(rejected).toEqual([]);
    expect((await drain(sourceOf(urlA))).sort()).toEqual(['for-a-1', 'for-a-2']);
    expect(await drain(sourceOf(urlB))).toEqual([]);
    expect((await drain(sourceOf(profileUrl))).sort()).toEqual(['declared', 'untargeted']);
  });

  it("sends high and emergency runs' commands to the priority queue, which a profile worker receives first", async () => {
    const urls = makeQueueUrls(sqs);
    const [stepsUrl, priorityQueueUrl] = await Promise.all([
      urls(stepQueueName('route', 'dev-flex')),
      urls(priorityQueueName('route', 'dev-flex')),
    ]);
    const rejected = await makeSqsCommandQueue(sqs, 'route').send('dev-flex', [
      command('low-1', undefined, 'low'),
      command('normal-1', undefined, 'normal'),
      command('high-1', undefined, 'high'),
      command('emergency-1', undefined, 'emergency'),
      // An agent node's command stays on its node's queue whatever the priority.
      command('agent-high', agent('web-a'), 'high'),
    ]);
    expect(rejected).toEqual([]);
    const worker = makeSqsCommandSource(sqs, stepsUrl, { waitSeconds: 0, priorityQueueUrl });
    const order = await drain(worker);
    expect(order.slice(0, 2).sort()).toEqual(['emergency-1', 'high-1']);
    expect(order.slice(2).sort()).toEqual(['low-1', 'normal-1']);
    // Each message was deleted from the queue it came from: both are empty now.
    expect(await drain(makeSqsCommandSource(sqs, priorityQueueUrl, { waitSeconds: 0 }))).toEqual([]);
    expect(await drain(makeSqsCommandSource(sqs, stepsUrl, { waitSeconds: 0 }))).toEqual([]);
    const nodeUrl = await ensureNodeQueue(sqs, { prefix: 'route', tenantId: 'acme', profile, nodeId: 'web-a' });
    expect(await drain(makeSqsCommandSource(sqs, nodeUrl, { waitSeconds: 0 }))).toEqual(['agent-high']);
  });

  it('keeps two tenants with the same node id on different queues', () => {
    expect(nodeQueueName('route', 'acme', 'web-1')).not.toBe(nodeQueueName('route', 'other', 'web-1'));
    expect(nodeQueueName('route', 'acme', `a.b:${'x'.repeat(120)}`)).toMatch(/^route-node-[0-9a-f]{16}-a_b_x+$/);
    expect(nodeQueueName('route', 'acme', `a.b:${'x'.repeat(120)}`).length).toBeLessThanOrEqual(80);
  });

  it('rejects a command for an agent node that never registered instead of losing it', async () => {
    const rejected = await makeSqsCommandQueue(sqs, 'route').send('dev-flex', [
      command('for-ghost', agent('ghost-1')),
      command('fine'),
    ]);
    expect(rejected).toEqual([
      { executionId: 'for-ghost', code: 'NODE_QUEUE_MISSING', message: expect.stringContaining("'ghost-1'") },
    ]);
  });
});

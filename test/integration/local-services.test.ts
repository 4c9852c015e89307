import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiGatewayManagementApiClient,
  DeleteConnectionCommand,
  GetConnectionCommand,
  GoneException,
  PostToConnectionCommand,
} from '@aws-sdk/client-apigatewaymanagementapi';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import {
  GetSecretValueCommand,
  RotateSecretCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import {
  ChangeMessageVisibilityCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { APIGatewayRequestAuthorizerEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startLocalEventBridge } from '../../local/eventbridge.js';
import { type Gateway, startGateway } from '../../local/gateway.js';
import { type LocalQueues, startLocalQueues } from '../../local/queues.js';
import { startLocalSecrets } from '../../local/secrets.js';
import { SANDBOX_PROFILES } from '../../shared/domain/sandbox-profiles.js';
import { deadLetterQueueName, stepQueueName } from '../../shared/resources/queues.js';
import { freePort } from '../support/local-dynamodb.js';

const region = 'us-east-1';
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('fauxqs: step queues with dead-letter redrive, and the evidence bucket', () => {
  let fauxqs: LocalQueues;
  let sqs: SQSClient;
  const profile = { ...SANDBOX_PROFILES['dev-flex'], queueVisibilitySeconds: 1, maxReceiveCount: 2 };
  beforeAll(async () => {
    fauxqs = await startLocalQueues({
      port: await freePort(),
      prefix: 'svc',
      region,
      evidenceBucket: 'svc-evidence',
      profiles: [profile],
    });
    sqs = new SQSClient({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      region,
      credentials,
      useQueueUrlAsEndpoint: false,
    });
  });
  afterAll(async () => {
    await fauxqs?.stop();
  });

  it('hides a received message for the visibility timeout, then moves it to the DLQ after maxReceiveCount', async () => {
    const url = async (name: string) => (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl!;
    const queueUrl = await url(stepQueueName('svc', 'dev-flex'));
    const dlqUrl = await url(deadLetterQueueName('svc', 'dev-flex'));
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: '{"step":"a"}' }));
    const receive = (q: string) =>
      sqs.send(new ReceiveMessageCommand({ QueueUrl: q, WaitTimeSeconds: 0, MaxNumberOfMessages: 1 }));

    const first = await receive(queueUrl);
    expect(first.Messages).toHaveLength(1);
    expect((await receive(queueUrl)).Messages ?? []).toHaveLength(0); // invisible now
    await sleep(1200);
    const second = await receive(queueUrl);
    expect(second.Messages?.[0]?.Body).toBe('{"step":"a"}');
    // Making it visible at once: the third receive exceeds maxReceiveCount (2) and redrives it.
    await sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl,
        ReceiptHandle: second.Messages![0]!.ReceiptHandle!,
        VisibilityTimeout: 0,
      }),
    );
    expect((await receive(queueUrl)).Messages ?? []).toHaveLength(0);
    const dead = await receive(dlqUrl);
    expect(dead.Messages?.[0]?.Body).toBe('{"step":"a"}');
  });

  it('stores and reads evidence objects over the S3 API', async () => {
    const s3 = new S3Client({ endpoint: `http://127.0.0.1:${fauxqs.port}`, region, credentials, forcePathStyle: true });
    await s3.send(new PutObjectCommand({ Bucket: 'svc-evidence', Key: 'runs/r1/bundle.json', Body: '{"ok":true}' }));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'svc-evidence', Key: 'runs/r1/bundle.json' }));
    expect(await got.Body?.transformToString()).toBe('{"ok":true}');
  });
});

describe('Secrets Manager and EventBridge endpoints', () => {
  it('answers GetSecretValue from the secrets file, created from the example, and re-read on change', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capstan-secrets-'));
    const file = join(dir, 'secrets.json');
    const service = await startLocalSecrets({
      port: await freePort(),
      file,
      exampleFile: join(import.meta.dirname, '../../local/secrets.example.json'),
      region,
    });
    try {
      const client = new SecretsManagerClient({ endpoint: service.endpoint, region, credentials });
      const got = await client.send(new GetSecretValueCommand({ SecretId: 'capstan/dev-flex/demo-api-token' }));
      expect(got.SecretString).toBe('local-demo-token-change-me');
      const object = await client.send(new GetSecretValueCommand({ SecretId: 'capstan/staging-standard/webhook' }));
      expect(JSON.parse(object.SecretString ?? '{}')).toMatchObject({ token: 'local-webhook-token' });
      await expect(client.send(new GetSecretValueCommand({ SecretId: 'nope' }))).rejects.toBeInstanceOf(
        ResourceNotFoundException,
      );
      writeFileSync(file, JSON.stringify({ nope: 'now here' }));
      expect((await client.send(new GetSecretValueCommand({ SecretId: 'nope' }))).SecretString).toBe('now here');
    } finally {
      await service.close();
    }
  });

  it('rotates a secret into a new current version, keeps the previous one, and rotates once per request token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capstan-secrets-'));
    const file = join(dir, 'secrets.json');
    writeFileSync(file, JSON.stringify({ 'capstan/prod-critical/db': { username: 'u', password: 'old' } }));
    const service = await startLocalSecrets({ port: await freePort(), file, exampleFile: file, region });
    try {
      const client = new SecretsManagerClient({ endpoint: service.endpoint, region, credentials });
      const SecretId = 'capstan/prod-critical/db';
      const before = await client.send(new GetSecretValueCommand({ SecretId }));
      const token = 'a'.repeat(32);
      const rotation = await client.send(new RotateSecretCommand({ SecretId, ClientRequestToken: token }));
      expect(rotation).toMatchObject({ Name: SecretId, VersionId: token });
      const after = await client.send(new GetSecretValueCommand({ SecretId }));
      expect(after).toMatchObject({ VersionId: token, VersionStages: ['AWSCURRENT'] });
      const rotated = JSON.parse(after.SecretString ?? '{}') as Record<string, string>;
      expect(rotated.username).toBe('u');
      expect(rotated.password).not.toBe('old');
      const previous = await client.send(new GetSecretValueCommand({ SecretId, VersionStage: 'AWSPREVIOUS' }));
      expect(previous).toMatchObject({ VersionId: before.VersionId, SecretString: before.SecretString });
      // The same request again (an SDK retry) does not rotate a second time.
      await client.send(new RotateSecretCommand({ SecretId, ClientRequestToken: token }));
      expect((await client.send(new GetSecretValueCommand({ SecretId }))).SecretString).toBe(after.SecretString);
      await expect(client.send(new RotateSecretCommand({ SecretId: 'nope' }))).rejects.toBeInstanceOf(
        ResourceNotFoundException,
      );
    } finally {
      await service.close();
    }
  });

  it('accepts PutEvents and keeps each event', async () => {
    const logFile = join(mkdtempSync(join(tmpdir(), 'capstan-events-')), 'events.jsonl');
    const service = await startLocalEventBridge({ port: await freePort(), logFile });
    try {
      const client = new EventBridgeClient({ endpoint: service.endpoint, region, credentials });
      const result = await client.send(
        new PutEventsCommand({
          Entries: [
            { Source: 'capstan', DetailType: 'Approval Escalated', Detail: '{"runId":"r1"}', EventBusName: 'b' },
          ],
        }),
      );
      expect(result.FailedEntryCount).toBe(0);
      const lines = readFileSync(logFile, 'utf8').trim().split('\n');
      expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ detailType: 'Approval Escalated', detail: { runId: 'r1' } });
    } finally {
      await service.close();
    }
  });
});

describe('the local WebSocket API and its @connections management API', () => {
  let gateway: Gateway;
  let port: number;
  const routes: Array<{ route: string; connectionId: string; body?: string }> = [];
  beforeAll(async () => {
    port = await freePort();
    gateway = await startGateway({
      port,
      staticJson: {},
      authorizer: async (event: APIGatewayRequestAuthorizerEvent) => {
        if (event.queryStringParameters?.token !== 'good') throw new Error('Unauthorized');
        return {
          principalId: 'u',
          policyDocument: { Version: '2012-10-17', Statement: [] },
          context: { subject: 'u', tenantId: 't', roles: 'viewer' },
        };
      },
      invoke: async (name, event) => {
        const e = event as { requestContext: { connectionId: string }; body?: string };
        routes.push({ route: name, connectionId: e.requestContext.connectionId, body: e.body });
        return { statusCode: 200 };
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('refuses a connection without a valid token', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws?token=bad`);
    const status = await new Promise<number>((resolve) =>
      socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)),
    );
    expect(status).toBe(401);
  });

  it('delivers a message posted through @connections, then answers 410 Gone once the connection is closed', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/ws?token=good`);
    const messages: string[] = [];
    socket.on('message', (data: Buffer) => messages.push(data.toString()));
    await new Promise((resolve) => socket.once('open', resolve));
    const connectionId = routes.find((r) => r.route === 'ws-connect')?.connectionId;
    expect(connectionId).toBeDefined();

    socket.send('{"action":"subscribe","runId":"r1"}');
    await eventually(() => routes.find((r) => r.route === 'ws-default'), '$default');
    expect(routes.find((r) => r.route === 'ws-default')?.body).toBe('{"action":"subscribe","runId":"r1"}');

    const management = new ApiGatewayManagementApiClient({
      endpoint: `http://127.0.0.1:${port}/ws`,
      region,
      credentials,
    });
    await management.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: '{"hello":1}' }));
    await eventually(() => (messages.length > 0 ? true : undefined), 'the posted message');
    expect(messages).toEqual(['{"hello":1}']);
    const info = await management.send(new GetConnectionCommand({ ConnectionId: connectionId }));
    expect(info.ConnectedAt).toBeInstanceOf(Date);

    await management.send(new DeleteConnectionCommand({ ConnectionId: connectionId }));
    await eventually(() => routes.find((r) => r.route === 'ws-disconnect'), '$disconnect');
    await expect(
      management.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: 'late' })),
    ).rejects.toBeInstanceOf(GoneException);
  });
});

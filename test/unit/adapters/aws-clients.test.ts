import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

beforeEach(() => {
  vi.resetModules();
  vi.stubEnv('AWS_REGION', 'us-east-1');
  vi.stubEnv('AWS_ENDPOINT_URL', '');
});

afterEach(() => {
  vi.unstubAllEnvs();
});

/** The endpoint a client resolves, as a URL string. */
async function endpointOf(client: { config: { endpoint?: () => Promise<{ hostname: string; port?: number }> } }) {
  const endpoint = await client.config.endpoint?.();
  return endpoint ? `${endpoint.hostname}:${endpoint.port}` : undefined;
}

describe('the AWS client factory', () => {
  it('builds each client once per process, on the endpoint configured when first used', async () => {
    const clients = await import('../../../shared/adapters/aws-clients.js');
    vi.stubEnv('AWS_ENDPOINT_URL_SQS', 'http://127.0.0.1:4566');
    const sqs = clients.sqsClient();
    vi.stubEnv('AWS_ENDPOINT_URL_SQS', 'http://127.0.0.1:9999');
    expect(clients.sqsClient()).toBe(sqs);
    expect(await endpointOf(sqs)).toBe('127.0.0.1:4566');
  });

  it('gives the DynamoDB document client the factory DynamoDB client', async () => {
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', 'http://127.0.0.1:8000');
    const { dynamoDbClient } = await import('../../../shared/adapters/aws-clients.js');
    const { documentClient } = await import('../../../shared/adapters/dynamodb/client.js');
    expect(documentClient.config).toBe(dynamoDbClient().config);
    expect(await endpointOf(dynamoDbClient())).toBe('127.0.0.1:8000');
  });

  it('builds a set-up DynamoDB client on the endpoint it is given', async () => {
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', 'http://127.0.0.1:8000');
    const { dynamoDbClientAt, dynamoDbClient } = await import('../../../shared/adapters/aws-clients.js');
    const client = dynamoDbClientAt('http://127.0.0.1:8123');
    try {
      expect(client).not.toBe(dynamoDbClient());
      expect(await endpointOf(client)).toBe('127.0.0.1:8123');
    } finally {
      client.destroy();
    }
  });

  it('reaches a configured endpoint through the in-process handler, and AWS through the SDK default', async () => {
    vi.stubEnv('AWS_ENDPOINT_URL_SFN', 'http://127.0.0.1:4003');
    const clients = await import('../../../shared/adapters/aws-clients.js');
    const { InProcessOrHttp } = await import('../../../shared/adapters/in-process.js');
    expect(clients.sfnClient().config.requestHandler).toBeInstanceOf(InProcessOrHttp);
    expect(clients.kmsClient().config.requestHandler).not.toBeInstanceOf(InProcessOrHttp);
  });

  it('keeps as many DynamoDB requests in flight as CAPSTAN_DYNAMODB_MAX_SOCKETS allows, the rest waiting their turn', async () => {
    // A DynamoDB endpoint that answers each request 250 ms after it arrives, noting how many are open at once.
    let open = 0;
    let most = 0;
    const server = createServer((req, res) => {
      most = Math.max(most, ++open);
      req.resume();
      setTimeout(() => {
        open--;
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
        res.end('{}');
      }, 250);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const inFlight = async (sockets: string | undefined) => {
        vi.resetModules();
        vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', url);
        vi.stubEnv('CAPSTAN_DYNAMODB_MAX_SOCKETS', sockets);
        vi.stubEnv('AWS_ACCESS_KEY_ID', 'local');
        vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
        const { dynamoDbClient } = await import('../../../shared/adapters/aws-clients.js');
        const client = dynamoDbClient();
        most = 0;
        const get = () => client.send(new GetItemCommand({ TableName: 'state', Key: { pk: { S: 'x' } } }));
        const replies = await Promise.all(Array.from({ length: 6 }, get));
        client.destroy();
        expect(replies.every((reply) => reply.Item === undefined)).toBe(true);
        return most;
      };
      expect(await inFlight('2')).toBe(2);
      expect(await inFlight(undefined)).toBe(6);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('refuses a DynamoDB socket cap that is not a whole number from 1 to 1000, naming the variable', async () => {
    const { dynamoDbSockets } = await import('../../../shared/config.js');
    expect(dynamoDbSockets({ CAPSTAN_DYNAMODB_MAX_SOCKETS: '4' })).toBe(4);
    expect(dynamoDbSockets({})).toBeUndefined();
    // Set but empty, as `CAPSTAN_DYNAMODB_MAX_SOCKETS= npm start` leaves it: no cap, not an error.
    expect(dynamoDbSockets({ CAPSTAN_DYNAMODB_MAX_SOCKETS: '' })).toBeUndefined();
    for (const bad of ['0', 'four', '2.5', '5000'])
      expect(() => dynamoDbSockets({ CAPSTAN_DYNAMODB_MAX_SOCKETS: bad })).toThrow(/CAPSTAN_DYNAMODB_MAX_SOCKETS/);
  });

  it('builds every client without the SDK logger middleware, which copied each request and response', async () => {
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', 'http://127.0.0.1:8000');
    vi.stubEnv('CAPSTAN_WS_ENDPOINT', 'http://127.0.0.1:9000/ws');
    for (const table of ['STATE', 'EVENTS', 'CONNECTIONS']) vi.stubEnv(`CAPSTAN_${table}_TABLE`, table.toLowerCase());
    const clients = await import('../../../shared/adapters/aws-clients.js');
    const { documentClient } = await import('../../../shared/adapters/dynamodb/client.js');
    const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
    // A client built without the factory has it: the check below could fail.
    expect(new DynamoDBClient({}).middlewareStack.identify().join()).toContain('loggerMiddleware');
    const built = [
      clients.dynamoDbClient(),
      documentClient,
      clients.sqsClient(),
      clients.sfnClient(),
      clients.s3Client(),
      clients.kmsClient(),
      clients.secretsClient(),
      clients.eventBridgeClient(),
      clients.ecsClient(),
      clients.ssmClient(),
      clients.lambdaClient(),
      clients.connectionsClient(),
      clients.dynamoDbClientAt('http://127.0.0.1:8123'),
    ];
    for (const client of built) expect(client.middlewareStack.identify().join()).not.toContain('loggerMiddleware');
  });
});

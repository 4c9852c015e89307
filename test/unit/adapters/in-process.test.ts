import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer, type Server } from 'node:http';
import { DescribeStateMachineCommand, SFNClient, StateMachineDoesNotExist } from '@aws-sdk/client-sfn';
import { afterEach, describe, expect, it } from 'vitest';
import { InProcessOrHttp, type InProcessRequest, serveInProcess } from '../../../shared/adapters/in-process.js';
import { freePort } from '../../support/local-dynamodb.js';

const ARN = 'arn:aws:states:us-east-1:000000000000:stateMachine:capstan-test';

/** A DescribeStateMachine answer with the given status. */
const described = (status: string) =>
  JSON.stringify({
    stateMachineArn: ARN,
    name: 'capstan-test',
    status,
    definition: '{}',
    roleArn: 'arn:aws:iam::000000000000:role/test',
    type: 'STANDARD',
    creationDate: 0,
  });

const clientOn = (url: string) =>
  new SFNClient({
    endpoint: url,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    requestHandler: new InProcessOrHttp(),
  });

const describe_ = (client: SFNClient) => client.send(new DescribeStateMachineCommand({ stateMachineArn: ARN }));

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An HTTP server on `port` answering every request with `body`, counting them. */
async function httpServer(port: number, body: string): Promise<{ server: Server; requests: () => number }> {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { server, requests: () => requests };
}

describe('endpoints served in this process', () => {
  it('answers an SDK request without a socket, signed and serialised as over HTTP', async () => {
    const url = `http://127.0.0.1:${await freePort()}`; // nothing listens there
    const seen: InProcessRequest[] = [];
    cleanups.push(
      serveInProcess(url, async (request) => {
        seen.push(request);
        return { status: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: described('ACTIVE') };
      }),
    );

    const reply = await describe_(clientOn(url));

    expect(reply.status).toBe('ACTIVE');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: 'POST',
      path: '/',
      headers: { 'x-amz-target': 'AWSStepFunctions.DescribeStateMachine' },
    });
    expect(seen[0]?.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 /);
    expect(JSON.parse(seen[0]?.body ?? '')).toEqual({ stateMachineArn: ARN });
  });

  it("gives the SDK the service's error as its typed exception", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    cleanups.push(
      serveInProcess(url, async () => ({
        status: 400,
        headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-errortype': 'StateMachineDoesNotExist' },
        body: JSON.stringify({ __type: 'StateMachineDoesNotExist', message: 'no such state machine' }),
      })),
    );

    const error = await describe_(clientOn(url)).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(StateMachineDoesNotExist);
    expect((error as Error).message).toBe('no such state machine');
  });

  it('goes over HTTP to an endpoint this process does not serve, or no longer serves', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const http = await httpServer(port, described('DELETING'));
    const client = clientOn(url);
    expect((await describe_(client)).status).toBe('DELETING');

    const stop = serveInProcess(url, async () => ({ status: 200, headers: {}, body: described('ACTIVE') }));
    expect((await describe_(client)).status).toBe('ACTIVE');
    stop();
    expect((await describe_(client)).status).toBe('DELETING');
    expect(http.requests()).toBe(2);
  });

  it('keeps the newer endpoint on an origin when an older one stops', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const stopOlder = serveInProcess(url, async () => ({ status: 200, headers: {}, body: described('DELETING') }));
    cleanups.push(serveInProcess(url, async () => ({ status: 200, headers: {}, body: described('ACTIVE') })));
    stopOlder();

    expect((await describe_(clientOn(url))).status).toBe('ACTIVE');
  });

  it("answers in the context the endpoint was registered in, not the caller's", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const span = new AsyncLocalStorage<string>();
    const seen: Array<string | undefined> = [];
    cleanups.push(
      serveInProcess(url, async () => {
        seen.push(span.getStore());
        return { status: 200, headers: {}, body: described('ACTIVE') };
      }),
    );

    await span.run('the caller', () => describe_(clientOn(url)));

    expect(seen).toEqual([undefined]);
  });

  it('rejects an aborted request as the SDK does over HTTP, before or while the endpoint answers', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    let calls = 0;
    cleanups.push(
      serveInProcess(url, async () => {
        calls++;
        await new Promise((resolve) => setTimeout(resolve, 200));
        return { status: 200, headers: {}, body: described('ACTIVE') };
      }),
    );
    const client = clientOn(url);
    const command = new DescribeStateMachineCommand({ stateMachineArn: ARN });

    const before = new AbortController();
    before.abort();
    await expect(client.send(command, { abortSignal: before.signal })).rejects.toMatchObject({ name: 'AbortError' });
    expect(calls).toBe(0);

    const during = new AbortController();
    const sent = client.send(command, { abortSignal: during.signal });
    setTimeout(() => during.abort(), 20);
    await expect(sent).rejects.toMatchObject({ name: 'AbortError' });
    expect(calls).toBe(1);
  });
});

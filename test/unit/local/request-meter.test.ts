import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyLabelOf, startMeteredEndpoint, totalOf, type MeteredEndpoint } from '../../../local/request-meter.js';

let upstream: ReturnType<typeof createServer>;
let meter: MeteredEndpoint;

beforeAll(async () => {
  upstream = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      if (request.url === '/refuse') {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ __type: 'TransactionCanceledException' }));
        return;
      }
      const answer = () => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ echoed: body, path: request.url }));
      };
      if (request.url === '/slow') setTimeout(answer, 60);
      else answer();
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  meter = await startMeteredEndpoint(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
});

afterAll(async () => {
  await meter.close();
  upstream.close();
});

/** A DynamoDB request of `operation` through the meter. */
const post = (operation: string, path: string) =>
  fetch(`${meter.url}${path}`, {
    method: 'POST',
    headers: { 'x-amz-target': `DynamoDB_20120810.${operation}` },
    body: '{}',
  });

describe('the request meter', () => {
  it('passes requests through and counts them by the operation they name', async () => {
    const call = (headers: Record<string, string>, path = '/', body = '{}') =>
      fetch(`${meter.url}${path}`, { method: 'POST', headers, body }).then((r) => r.json());
    expect(await call({ 'x-amz-target': 'DynamoDB_20120810.PutItem' }, '/', '{"a":1}')).toEqual({
      echoed: '{"a":1}',
      path: '/',
    });
    await call({ 'x-amz-target': 'DynamoDB_20120810.PutItem' });
    await call({ 'x-amz-target': 'AmazonSQS.ReceiveMessage' });
    await call({}, '/?Action=SendMessage');
    await call({}, '/bucket/key');
    const { counts } = await meter.read();
    expect(counts).toEqual({ PutItem: 2, ReceiveMessage: 1, SendMessage: 1, 'S3 POST': 1 });
    expect(totalOf(counts)).toBe(5);
    await meter.reset();
    expect(totalOf((await meter.read()).counts)).toBe(0);
  });

  it('counts the requests the service refuses apart, per operation', async () => {
    await meter.reset();
    expect((await post('TransactWriteItems', '/refuse')).status).toBe(400);
    expect((await post('TransactWriteItems', '/')).status).toBe(200);
    const readings = await meter.read();
    expect(readings.counts.TransactWriteItems).toBe(2);
    expect(readings.failures).toEqual({ TransactWriteItems: 1 });
    await meter.reset();
    expect((await meter.read()).failures).toEqual({});
  });

  it('times each request through it, per operation', async () => {
    await meter.reset();
    await (await post('UpdateItem', '/slow')).text();
    await (await post('UpdateItem', '/')).text();
    const [slow, quick] = (await meter.read()).latencies.UpdateItem ?? [];
    expect(slow).toBeGreaterThanOrEqual(55);
    expect(quick).toBeLessThan(slow ?? 0);
    await meter.reset();
    expect(Object.values((await meter.read()).latencies).flat()).toEqual([]);
  });

  it('labels a DynamoDB request by operation, table and key shape, without ids', () => {
    expect(
      keyLabelOf(
        'GetItem',
        JSON.stringify({ TableName: 'capstan-state', Key: { pk: { S: 'RUN#run-1234' }, sk: { S: 'META' } } }),
      ),
    ).toBe('GetItem state RUN#*');
    expect(
      keyLabelOf(
        'Query',
        JSON.stringify({
          TableName: 'capstan-state',
          IndexName: 'gsi2',
          ExpressionAttributeValues: { ':pk': { S: 'ACTIVE_RUNS' }, ':before': { S: '2026' } },
        }),
      ),
    ).toBe('Query state (gsi2) ACTIVE_RUNS');
    expect(
      keyLabelOf(
        'TransactWriteItems',
        JSON.stringify({
          TransactItems: [
            { Update: { TableName: 'capstan-state', Key: { pk: { S: 'RUN#r' }, sk: { S: 'META' } } } },
            { Put: { TableName: 'capstan-events', Item: { runId: { S: 'r' }, seq: { N: '3' } } } },
            { Put: { TableName: 'capstan-events', Item: { runId: { S: 'r' }, seq: { N: '4' } } } },
          ],
        }),
      ),
    ).toBe('TransactWriteItems [Put events, Update state META]');
    expect(keyLabelOf('GetItem', 'not json')).toBeUndefined();
  });
});

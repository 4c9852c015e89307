import { request as httpRequest, createServer, Agent, type IncomingMessage, type Server } from 'node:http';
import { bindHost } from './bind-host.js';
import type { AddressInfo } from 'node:net';

/** Requests counted per operation (`PutItem`, `SendMessageBatch`, `S3 PUT`). */
export type RequestCounts = Record<string, number>;

export interface MeteredEndpoint {
  readonly url: string;
  readonly counts: RequestCounts;
  /**
   * DynamoDB requests by operation, table and key shape (`Query state RUN#*`, `GetItem state
   * TENANT#*#CONTROL`): which reads and writes a figure is made of.
   */
  readonly byKey: RequestCounts;
  /** Requests the service refused (4xx or 5xx), per operation: a lost conditional write shows here. */
  readonly failures: RequestCounts;
  /** How long each request took through the endpoint, in milliseconds, per operation. */
  readonly latencies: Record<string, number[]>;
  total(): number;
  reset(): void;
  close(): Promise<void>;
}

/**
 * The operation a request names: the JSON protocols (DynamoDB, SQS, Step Functions) carry it
 * in `X-Amz-Target` (`DynamoDB_20120810.PutItem`), the query protocol in `Action=`, and a
 * REST call (S3) is counted by method.
 */
export function operationOf(request: IncomingMessage): string {
  const target = request.headers['x-amz-target'];
  if (typeof target === 'string') return target.split('.').at(-1) ?? target;
  const action = new URL(request.url ?? '/', 'http://local').searchParams.get('Action');
  if (action) return action;
  return `S3 ${request.method ?? 'GET'}`;
}

/** A key value with its ids left out: the upper-case parts the key module builds keys from. */
const shapeOf = (value: unknown): string =>
  typeof value === 'string'
    ? value
        .split('#')
        .map((part) => (/^[A-Z_]+$/.test(part) ? part : '*'))
        .join('#')
    : '?';

/** What a DynamoDB request reads or writes, from its JSON body: table (without prefix) and key shape. */
export function keyLabelOf(operation: string, body: string): string | undefined {
  let request: Record<string, unknown>;
  try {
    request = JSON.parse(body) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const table = typeof request.TableName === 'string' ? (request.TableName.split('-').at(-1) ?? '') : '';
  const attr = (record: unknown, name: string) =>
    ((record as Record<string, Record<string, unknown>> | undefined)?.[name] ?? {}).S;
  if (operation === 'Query') {
    const values = request.ExpressionAttributeValues as Record<string, unknown> | undefined;
    const first = values ? Object.values(values)[0] : undefined;
    const index = typeof request.IndexName === 'string' ? ` (${request.IndexName})` : '';
    return `Query ${table}${index} ${shapeOf((first as Record<string, unknown> | undefined)?.S)}`;
  }
  if (request.Key !== undefined)
    return `${operation} ${table} ${shapeOf(attr(request.Key, 'pk') ?? attr(request.Key, 'runId'))}`;
  if (operation === 'TransactWriteItems' && Array.isArray(request.TransactItems)) {
    const kinds = request.TransactItems.map((item: Record<string, Record<string, unknown>>) => {
      const [kind, spec] = Object.entries(item)[0] ?? ['?', {}];
      const key = (spec?.Key ?? spec?.Item) as Record<string, unknown> | undefined;
      const itemTable = typeof spec?.TableName === 'string' ? (spec.TableName.split('-').at(-1) ?? '') : '';
      const sortKey = attr(key, 'sk') ?? attr(key, 'pk');
      return sortKey === undefined ? `${kind} ${itemTable}` : `${kind} ${itemTable} ${shapeOf(sortKey)}`;
    });
    return `TransactWriteItems [${[...new Set(kinds)].sort().join(', ')}]`;
  }
  return `${operation} ${table}`;
}

/**
 * A pass-through proxy in front of a local endpoint that counts each request by operation,
 * so the bench can report requests per step as AWS would bill them.
 */
export async function startMeteredEndpoint(target: string, port = 0): Promise<MeteredEndpoint> {
  const upstream = new URL(target);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const counts: RequestCounts = {};
  const failures: RequestCounts = {};
  const byKey: RequestCounts = {};
  const latencies: Record<string, number[]> = {};
  const server: Server = createServer((request, response) => {
    const operation = operationOf(request);
    counts[operation] = (counts[operation] ?? 0) + 1;
    const received = performance.now();
    response.once('finish', () => (latencies[operation] ??= []).push(performance.now() - received));
    if (String(request.headers['x-amz-target'] ?? '').startsWith('DynamoDB_')) {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const label = keyLabelOf(operation, Buffer.concat(chunks).toString('utf8'));
        if (label) byKey[label] = (byKey[label] ?? 0) + 1;
      });
    }
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: request.method,
        path: request.url,
        headers: request.headers,
        agent,
      },
      (reply) => {
        if ((reply.statusCode ?? 502) >= 400) failures[operation] = (failures[operation] ?? 0) + 1;
        response.writeHead(reply.statusCode ?? 502, reply.headers);
        reply.pipe(response);
      },
    );
    forward.on('error', (error) => {
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(error.message);
    });
    request.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(port, bindHost(), resolve));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}`,
    counts,
    failures,
    byKey,
    latencies,
    total: () => Object.values(counts).reduce((sum, n) => sum + n, 0),
    reset: () => {
      for (const key of Object.keys(counts)) counts[key] = 0;
      for (const key of Object.keys(failures)) failures[key] = 0;
      for (const key of Object.keys(byKey)) byKey[key] = 0;
      for (const key of Object.keys(latencies)) latencies[key] = [];
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}

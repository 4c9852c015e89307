import { request as httpRequest, createServer, Agent, type IncomingMessage, type Server } from 'node:http';
import { bindHost } from './bind-host.js';
import type { AddressInfo } from 'node:net';

/** Requests counted per operation (`PutItem`, `SendMessageBatch`, `S3 PUT`). */
export type RequestCounts = Record<string, number>;

export interface MeteredEndpoint {
  readonly url: string;
  readonly counts: RequestCounts;
  /** Requests the service refused (4xx or 5xx), per operation: a lost conditional write shows here. */
  readonly failures: RequestCounts;
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

/**
 * A pass-through proxy in front of a local endpoint that counts each request by operation,
 * so the bench can report requests per step as AWS would bill them.
 */
export async function startMeteredEndpoint(target: string, port = 0): Promise<MeteredEndpoint> {
  const upstream = new URL(target);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const counts: RequestCounts = {};
  const failures: RequestCounts = {};
  const server: Server = createServer((request, response) => {
    const operation = operationOf(request);
    counts[operation] = (counts[operation] ?? 0) + 1;
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
    total: () => Object.values(counts).reduce((sum, n) => sum + n, 0),
    reset: () => {
      for (const key of Object.keys(counts)) counts[key] = 0;
      for (const key of Object.keys(failures)) failures[key] = 0;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}

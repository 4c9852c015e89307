import { request as httpRequest, createServer, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { z } from 'zod';
import { bindHost } from './bind-host.js';
import { keyLabelOf, type MeterReadings, meterRequestSchema, operationOf, type MeterReply } from './request-meter.js';

/**
 * The request meter's proxy, in a thread of its own: counting and forwarding every request costs
 * event-loop time, which must not queue behind (or delay) the handlers of the process it measures.
 */
const { target, port } = z.object({ target: z.string(), port: z.number().int() }).parse(workerData);
const channel = parentPort;
if (!channel) throw new Error('the request meter runs in a worker thread');

const upstream = new URL(target);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const empty = (): MeterReadings => ({ counts: {}, byKey: {}, failures: {}, latencies: {} });
let readings = empty();

const server: Server = createServer((request, response) => {
  const operation = operationOf(request);
  const tally = readings;
  tally.counts[operation] = (tally.counts[operation] ?? 0) + 1;
  const received = performance.now();
  response.once('finish', () => (tally.latencies[operation] ??= []).push(performance.now() - received));
  if (String(request.headers['x-amz-target'] ?? '').startsWith('DynamoDB_')) {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const label = keyLabelOf(operation, Buffer.concat(chunks).toString('utf8'));
      if (label) tally.byKey[label] = (tally.byKey[label] ?? 0) + 1;
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
      if ((reply.statusCode ?? 502) >= 400) tally.failures[operation] = (tally.failures[operation] ?? 0) + 1;
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

const reply = (message: MeterReply) => channel.postMessage(message);

channel.on('message', (raw) => {
  const message = meterRequestSchema.parse(raw);
  if (message.kind === 'read') reply({ kind: 'read', id: message.id, readings });
  else if (message.kind === 'reset') {
    // A request under way when the counts reset is counted in the old readings, not the new.
    readings = empty();
    reply({ kind: 'reset', id: message.id });
  } else {
    server.closeAllConnections();
    server.close(() => {
      agent.destroy();
      channel.close();
    });
  }
});

server.listen(port, bindHost(), () => reply({ kind: 'ready', port: (server.address() as AddressInfo).port }));

import type { IncomingMessage } from 'node:http';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';

/** Requests counted per operation (`PutItem`, `SendMessageBatch`, `S3 PUT`). */
export type RequestCounts = Record<string, number>;

/** What a meter counted since it started or was last reset. */
export interface MeterReadings {
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
}

export interface MeteredEndpoint {
  readonly url: string;
  read(): Promise<MeterReadings>;
  reset(): Promise<void>;
  /** CPU the meter's thread has used, in microseconds (as `process.cpuUsage()`). */
  cpuUsage(): Promise<NodeJS.CpuUsage>;
  close(): Promise<void>;
}

/** Every request a set of counts holds. */
export const totalOf = (counts: RequestCounts): number => Object.values(counts).reduce((sum, n) => sum + n, 0);

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

const countsSchema = z.record(z.string(), z.number());
const readingsSchema = z.object({
  counts: countsSchema,
  byKey: countsSchema,
  failures: countsSchema,
  latencies: z.record(z.string(), z.array(z.number())),
});

/** What the meter's thread is asked. */
export const meterRequestSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('read'), id: z.number() }),
  z.object({ kind: z.literal('reset'), id: z.number() }),
  z.object({ kind: z.literal('close') }),
]);
export type MeterRequest = z.infer<typeof meterRequestSchema>;

/** What the meter's thread answers. */
export const meterReplySchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('ready'), port: z.number() }),
  z.object({ kind: z.literal('read'), id: z.number(), readings: readingsSchema }),
  z.object({ kind: z.literal('reset'), id: z.number() }),
]);
export type MeterReply = z.infer<typeof meterReplySchema>;

/**
 * A pass-through proxy in front of a local endpoint that counts each request by operation, so the
 * bench can report requests per step as AWS would bill them. It runs in a worker thread: its
 * forwarding does not wait on the event loop of the process whose requests it counts.
 */
export async function startMeteredEndpoint(target: string, port = 0): Promise<MeteredEndpoint> {
  const thread = new Worker(new URL('./request-meter-thread.ts', import.meta.url), {
    workerData: { target, port },
    // The thread's module is TypeScript, loaded as this process loads its own.
    execArgv: ['--import', import.meta.resolve('tsx')],
  });
  const waiting = new Map<number, { resolve: (reply: MeterReply) => void; reject: (error: Error) => void }>();
  let gone: Error | undefined;
  // Nothing asked of a thread that has stopped waits for ever.
  const stop = (error: Error) => {
    gone ??= error;
    for (const { reject } of waiting.values()) reject(gone);
    waiting.clear();
  };
  const started = new Promise<number>((resolve, reject) => {
    thread.on('message', (raw) => {
      const parsed = meterReplySchema.safeParse(raw);
      if (!parsed.success)
        return stop(new Error(`the request meter answered what it should not: ${parsed.error.message}`));
      const reply = parsed.data;
      if (reply.kind === 'ready') resolve(reply.port);
      else {
        waiting.get(reply.id)?.resolve(reply);
        waiting.delete(reply.id);
      }
    });
    thread.once('error', (error) => {
      reject(error);
      stop(error);
    });
    thread.once('exit', (code) => reject(new Error(`the request meter stopped before it listened (exit ${code})`)));
  });
  const exited = new Promise<void>((resolve) =>
    thread.once('exit', (code) => {
      stop(new Error(`the request meter stopped (exit ${code})`));
      resolve();
    }),
  );
  const bound = await started;
  let next = 0;
  const ask = (kind: 'read' | 'reset') =>
    new Promise<MeterReply>((resolve, reject) => {
      if (gone) return reject(gone);
      const id = next++;
      waiting.set(id, { resolve, reject });
      thread.postMessage({ kind, id } satisfies MeterRequest);
    });
  return {
    url: `http://127.0.0.1:${bound}`,
    read: async () => {
      const reply = await ask('read');
      if (reply.kind !== 'read') throw new Error(`the request meter answered ${reply.kind} to read`);
      return reply.readings;
    },
    reset: async () => {
      await ask('reset');
    },
    cpuUsage: () => thread.cpuUsage(),
    close: async () => {
      thread.postMessage({ kind: 'close' } satisfies MeterRequest);
      await exited;
    },
  };
}

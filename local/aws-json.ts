import { createServer, type Server } from 'node:http';
import { serveInProcess } from '../shared/adapters/in-process.js';
import { bindHost } from './bind-host.js';

/** An error the way an AWS JSON-protocol service reports it; the SDK turns `type` into the exception name. */
export class AwsServiceError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
  ) {
    super(message);
    this.name = type;
  }
}

export type Operation = (input: Record<string, unknown>) => Promise<unknown> | unknown;

export interface JsonServiceOptions {
  readonly port: number;
  /** `AWSStepFunctions`, `secretsmanager`: the part of `X-Amz-Target` before the dot. */
  readonly targetPrefix: string;
  readonly operations: Readonly<Record<string, Operation>>;
  /** Called once per request with the operation name, for the request counters. */
  readonly onRequest?: (operation: string) => void;
}

export interface JsonService {
  readonly endpoint: string;
  readonly server: Server;
  close(): Promise<void>;
}

/** A request's answer: status, headers and the JSON body. */
interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** Answers one request: the operation `X-Amz-Target` names, on the JSON body, or the error AWS would give. */
async function answer(
  options: JsonServiceOptions,
  method: string | undefined,
  target: string | undefined,
  body: string,
): Promise<Answer> {
  const reply = (status: number, value: unknown, headers: Record<string, string> = {}): Answer => ({
    status,
    headers: { 'content-type': 'application/x-amz-json-1.0', ...headers },
    body: JSON.stringify(value),
  });
  const fail = (error: AwsServiceError) =>
    reply(error.status, { __type: error.type, message: error.message }, { 'x-amzn-errortype': error.type });
  try {
    const [prefix, name] = typeof target === 'string' ? target.split('.') : [];
    const operation = name === undefined ? undefined : options.operations[name];
    if (method !== 'POST' || prefix !== options.targetPrefix || !operation || name === undefined)
      return fail(new AwsServiceError('UnknownOperationException', `unsupported operation ${String(target)}`));
    options.onRequest?.(name);
    let input: unknown;
    try {
      input = body === '' ? {} : JSON.parse(body);
    } catch {
      return fail(new AwsServiceError('SerializationException', 'request body is not JSON'));
    }
    if (typeof input !== 'object' || input === null || Array.isArray(input))
      return fail(new AwsServiceError('SerializationException', 'request body must be a JSON object'));
    return reply(200, (await operation(input as Record<string, unknown>)) ?? {});
  } catch (error) {
    if (error instanceof AwsServiceError) return fail(error);
    console.error(`${options.targetPrefix}: internal error`, error);
    return fail(
      new AwsServiceError('InternalServerError', error instanceof Error ? error.message : String(error), 500),
    );
  }
}

/**
 * A minimal server for the AWS JSON 1.0/1.1 protocols: `POST /` with `X-Amz-Target: <Prefix>.<Operation>`
 * and a JSON body. Requests are not signature-checked; everything else is what the SDK expects.
 * This process's own SDK clients reach it without the socket (`serveInProcess`), with the same answers.
 */
export function startJsonService(options: JsonServiceOptions): Promise<JsonService> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const target = req.headers['x-amz-target'];
      void answer(
        options,
        req.method,
        typeof target === 'string' ? target : undefined,
        Buffer.concat(chunks).toString('utf8'),
      )
        .then((answered) => {
          res.writeHead(answered.status, answered.headers);
          res.end(answered.body);
        })
        .catch((error: unknown) => {
          // Only a failure to write the answer itself lands here: the connection is all that is left.
          console.error(`${options.targetPrefix}: could not answer`, error);
          res.destroy();
        });
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, bindHost(), () => {
      const endpoint = `http://127.0.0.1:${options.port}`;
      const unserve = serveInProcess(endpoint, (request) =>
        answer(options, request.method, request.headers['x-amz-target'], request.body),
      );
      resolve({
        endpoint,
        server,
        close: () => {
          unserve();
          return new Promise((done) => server.close(() => done()));
        },
      });
    });
  });
}

/** A required string field of a request, or the ValidationException AWS would answer. */
export function requireString(input: Record<string, unknown>, field: string): string {
  const value = input[field];
  if (typeof value !== 'string' || value.length === 0)
    throw new AwsServiceError('ValidationException', `${field} is required`);
  return value;
}

export function optionalString(input: Record<string, unknown>, field: string): string | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new AwsServiceError('ValidationException', `${field} must be a string`);
  return value;
}

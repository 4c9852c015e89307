import { AsyncResource } from 'node:async_hooks';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { HttpHandlerOptions } from '@smithy/types';

/** A request as an endpoint served in this process sees it: what the AWS JSON protocols need of one. */
export interface InProcessRequest {
  readonly method: string;
  readonly path: string;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface InProcessReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** Answers a request the way the endpoint's HTTP server would, without the server. */
export type InProcessEndpoint = (request: InProcessRequest) => Promise<InProcessReply>;

const REGISTRY = Symbol.for('capstan.in-process-endpoints');

/**
 * Endpoints this process serves itself, by origin (`http://127.0.0.1:4003`): one registry per
 * process, even where a module is loaded twice (a test that resets its modules).
 */
const endpoints: Map<string, InProcessEndpoint> = ((globalThis as { [REGISTRY]?: Map<string, InProcessEndpoint> })[
  REGISTRY
] ??= new Map());

const originOf = (url: string) => new URL(url).origin;

/**
 * Lets this process's SDK clients reach an endpoint it serves itself (the local stack's Step
 * Functions, Secrets Manager, KMS and EventBridge) by a function call instead of a loopback
 * socket: the request is signed and serialised as before, only the HTTP hop is left out. The
 * endpoint still listens for other processes. Each request runs in the async context the endpoint
 * was registered in, as a server's handler runs in its own, so nothing of the caller's (its trace
 * span) follows it in. Answers a function that stops serving it.
 */
export function serveInProcess(url: string, endpoint: InProcessEndpoint): () => void {
  const origin = originOf(url);
  const scope = new AsyncResource('capstan.in-process-endpoint');
  const served: InProcessEndpoint = (request) => scope.runInAsyncScope(endpoint, undefined, request);
  endpoints.set(origin, served);
  return () => {
    if (endpoints.get(origin) === served) endpoints.delete(origin);
  };
}

/** A request body as text, or undefined for a stream (which goes over HTTP). */
function bodyText(body: unknown): string | undefined {
  if (body === undefined || body === null) return '';
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  return undefined;
}

/** The error the SDK's own handler rejects with for an aborted request. */
function abortError(): Error {
  const error = new Error('Request aborted');
  error.name = 'AbortError';
  return error;
}

/** `work`'s outcome, or the SDK's abort error once `signal` aborts first. */
async function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortError());
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

type Request = Parameters<NodeHttpHandler['handle']>[0];
type Handled = Awaited<ReturnType<NodeHttpHandler['handle']>>;

/**
 * The request handler of every client the factory builds for a configured endpoint: a request to
 * an endpoint served in this process is answered there; any other goes over HTTP. Looked up per
 * request, so a client built before a local stack started (or after one stopped) still finds it.
 */
export class InProcessOrHttp extends NodeHttpHandler {
  override async handle(request: Request, options?: HttpHandlerOptions): Promise<Handled> {
    const endpoint = endpoints.get(`${request.protocol}//${request.hostname}${request.port ? `:${request.port}` : ''}`);
    const body = bodyText(request.body);
    if (!endpoint || body === undefined) return super.handle(request, options);
    if (options?.abortSignal?.aborted) throw abortError();
    const signal = options?.abortSignal instanceof AbortSignal ? options.abortSignal : undefined;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value;
    const answered = endpoint({ method: request.method, path: request.path, headers, body });
    // An aborted request is answered as the SDK's own handler answers it; the endpoint finishes unheard.
    const reply = signal ? await untilAborted(answered, signal) : await answered;
    return { response: { statusCode: reply.status, headers: { ...reply.headers }, body: Buffer.from(reply.body) } };
  }
}

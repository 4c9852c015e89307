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

/** Endpoints this process serves itself, by origin (`http://127.0.0.1:4003`). */
const endpoints = new Map<string, InProcessEndpoint>();

const originOf = (url: string) => new URL(url).origin;

/**
 * Lets this process's SDK clients reach an endpoint it serves itself (the local stack's Step
 * Functions, Secrets Manager, KMS and EventBridge) by a function call instead of a loopback
 * socket: the request is signed and serialised as before, only the HTTP hop is left out. The
 * endpoint still listens for other processes. Answers a function that stops serving it.
 */
export function serveInProcess(url: string, endpoint: InProcessEndpoint): () => void {
  const origin = originOf(url);
  endpoints.set(origin, endpoint);
  return () => {
    if (endpoints.get(origin) === endpoint) endpoints.delete(origin);
  };
}

function bodyText(body: unknown): string {
  if (body === undefined || body === null) return '';
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  throw new Error('an in-process request has a streaming body');
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
    if (!endpoint) return super.handle(request, options);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value;
    const reply = await endpoint({ method: request.method, path: request.path, headers, body: bodyText(request.body) });
    const response = { statusCode: reply.status, headers: { ...reply.headers }, body: Buffer.from(reply.body) };
    return { response };
  }
}

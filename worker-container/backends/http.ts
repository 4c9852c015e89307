import { durationMs } from '../../shared/domain/duration.js';
import type { Json } from '../../shared/domain/canonical.js';
import { httpGetParams, httpPostParams, httpRequestParams } from '../../shared/domain/catalogue.js';
import { ActionError, type ActionContext, type ActionResult, type Backend, typed } from './types.js';

const DEFAULT_TIMEOUT_MS = 30_000;
/** Characters of the response body written to the step output. */
const OUTPUT_EXCERPT = 2000;

interface HttpCall {
  readonly url: string;
  readonly method: string;
  readonly headers?: Record<string, string>;
  readonly body?: Json;
  readonly expect_status: number;
  readonly expect_json?: Record<string, string | number | boolean | null>;
  readonly timeout?: string;
  readonly max_response_bytes: number;
}

/** The value at a dotted path (`data.items.0.id`) of a parsed JSON document. */
export function valueAt(document: unknown, path: string): unknown {
  let current: unknown = document;
  for (const key of path.split('.')) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** Reads at most `limit` bytes of a body; more is an error (and the rest is not downloaded). */
async function readCapped(response: Response, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (!response.body) return Buffer.alloc(0);
  for await (const chunk of response.body) {
    size += chunk.byteLength;
    if (size > limit) {
      await response.body.cancel().catch(() => undefined);
      throw new ActionError('RESPONSE_TOO_LARGE', `the response is larger than ${limit} bytes`, false);
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

async function call(request: HttpCall, { signal, output }: ActionContext): Promise<ActionResult> {
  const timeoutMs = request.timeout ? durationMs(request.timeout) : DEFAULT_TIMEOUT_MS;
  const hasBody = request.body !== undefined && request.method !== 'GET' && request.method !== 'HEAD';
  let response: Response;
  try {
    response = await fetch(request.url, {
      method: request.method,
      headers: { ...(hasBody && { 'content-type': 'application/json' }), ...request.headers },
      ...(hasBody && { body: JSON.stringify(request.body) }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      redirect: 'manual',
    });
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    const timedOut = (error as Error).name === 'TimeoutError';
    throw new ActionError(
      timedOut ? 'HTTP_TIMEOUT' : 'HTTP_UNREACHABLE',
      timedOut ? `no answer from ${request.url} within ${timeoutMs} ms` : `${request.url}: ${(error as Error).message}`,
      true,
    );
  }
  const body = await readCapped(response, request.max_response_bytes);
  const text = body.toString('utf8');
  output('stdout', `${request.method} ${request.url} -> ${response.status} (${body.length} bytes)`);
  if (text) output('stdout', text.length > OUTPUT_EXCERPT ? `${text.slice(0, OUTPUT_EXCERPT)}…` : text);
  if (response.status !== request.expect_status)
    throw new ActionError(
      'UNEXPECTED_STATUS',
      `expected HTTP ${request.expect_status}, got ${response.status}`,
      response.status >= 500 || response.status === 429,
    );
  const checked: Record<string, Json> = {};
  if (request.expect_json) {
    let document: unknown;
    try {
      document = JSON.parse(text);
    } catch {
      throw new ActionError('NOT_JSON', 'the response body is not JSON', false);
    }
    for (const [path, expected] of Object.entries(request.expect_json)) {
      const actual = valueAt(document, path);
      if (actual !== expected)
        throw new ActionError(
          'JSON_MISMATCH',
          `${path} is ${JSON.stringify(actual) ?? 'missing'}, expected ${JSON.stringify(expected)}`,
          false,
        );
      checked[path] = expected;
    }
  }
  return { output: { status: response.status, bytes: body.length, ...(request.expect_json && { checked }) } };
}

/** `http`: requests with an expected status, JSON field checks, a timeout and a response size cap. */
export function makeHttpBackend(): Backend {
  return {
    name: 'http',
    actions: {
      get: (ctx) => call({ ...typed(httpGetParams, ctx.params), method: 'GET' }, ctx),
      post: (ctx) => call({ ...typed(httpPostParams, ctx.params), method: 'POST' }, ctx),
      request: (ctx) => call(typed(httpRequestParams, ctx.params), ctx),
    },
  };
}

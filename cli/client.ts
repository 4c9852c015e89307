import type { z } from 'zod';
import { errorBodySchema } from '../shared/resources/api-schemas.js';
import type { ApiConfig } from './config.js';
import { ApiError, NetworkError } from './errors.js';

export interface RequestOptions {
  /** A JSON value, or YAML text sent as `application/yaml`. */
  readonly body?: unknown;
  readonly yaml?: boolean;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly headers?: Readonly<Record<string, string>>;
}

/** What to do next for an API error code. */
function hintFor(code: string, status: number, config: ApiConfig): string | undefined {
  if (status === 401 || code === 'UNAUTHORIZED')
    return `the token from ${config.source} was refused: check --token or CAPSTAN_TOKEN, or restart the local stack`;
  if (code === 'FORBIDDEN') return 'use a token with the role named above (with the local stack: --as <role>)';
  if (code === 'VALIDATION_FAILED') return 'fix the fields listed above and try again';
  if (code === 'NOT_FOUND') return 'check the id (list them with `capstan runs list` or `capstan runbooks list`)';
  if (status >= 500) return 'try again; if it persists, the API logs have the request id';
  return undefined;
}

/** The REST API, parsed with the same zod schemas the handlers answer with. */
export class ApiClient {
  constructor(
    readonly config: ApiConfig,
    private readonly fetchImpl: typeof fetch = fetch,
  ) {}

  /** A GET of bytes (a bundle, an artifact); an error answer is an {@link ApiError} as for JSON. */
  async download(path: string, accept: string): Promise<Uint8Array> {
    const response = await this.send(`${this.config.url}${path}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${this.config.token}`, accept },
    });
    if (!response.ok) throw this.failure('GET', path, response, await response.text());
    return new Uint8Array(await response.arrayBuffer());
  }

  private async send(url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.fetchImpl(url, init);
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new NetworkError(
        `cannot reach ${this.config.url} (${cause?.code ?? cause?.message ?? (error as Error).message})`,
        `is the API up? The local stack starts with \`npm start\`; the address came from ${this.config.source}`,
      );
    }
  }

  private failure(method: string, path: string, response: Response, text: string): ApiError {
    let raw: unknown;
    try {
      raw = text === '' ? undefined : JSON.parse(text);
    } catch {
      raw = text;
    }
    const parsed = errorBodySchema.safeParse(raw);
    const code = parsed.success ? parsed.data.error.code : response.status === 401 ? 'UNAUTHORIZED' : 'HTTP_ERROR';
    const message = parsed.success
      ? parsed.data.error.message
      : `${method} ${path} answered ${response.status}${typeof raw === 'string' && raw ? `: ${raw.slice(0, 200)}` : ''}`;
    return new ApiError(
      code,
      message,
      response.status,
      hintFor(code, response.status, this.config),
      parsed.success ? parsed.data.error.details : undefined,
    );
  }

  /** One request; a 2xx answer parsed with `schema`, anything else an {@link ApiError}. */
  async request<T extends z.ZodType>(
    method: string,
    path: string,
    schema: T,
    options: RequestOptions = {},
  ): Promise<{ data: z.infer<T>; raw: unknown; status: number }> {
    const query = Object.entries(options.query ?? {}).flatMap(([k, v]) =>
      v === undefined ? [] : [[k, String(v)] as [string, string]],
    );
    const url = `${this.config.url}${path}${query.length > 0 ? `?${new URLSearchParams(query)}` : ''}`;
    const hasBody = options.body !== undefined;
    const response = await this.send(url, {
      method,
      headers: {
        authorization: `Bearer ${this.config.token}`,
        accept: 'application/json',
        ...(hasBody && { 'content-type': options.yaml ? 'application/yaml' : 'application/json' }),
        ...options.headers,
      },
      ...(hasBody && { body: options.yaml ? String(options.body) : JSON.stringify(options.body) }),
    });
    const text = await response.text();
    if (!response.ok) throw this.failure(method, path, response, text);
    let raw: unknown;
    try {
      raw = text === '' ? undefined : JSON.parse(text);
    } catch {
      raw = text;
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success)
      throw new ApiError(
        'BAD_RESPONSE',
        `${method} ${path} answered something this CLI does not understand: ${parsed.error.issues[0]?.message ?? ''} at ${parsed.error.issues[0]?.path.join('.') ?? ''}`,
        response.status,
        'the CLI and the API may be different versions',
      );
    return { data: parsed.data, raw, status: response.status };
  }
}

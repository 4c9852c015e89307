import { expect } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';

export interface ApiReply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** One request to a local stack's REST API as the bearer of `token`; a string body goes as YAML. */
export async function callApi(
  restUrl: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<ApiReply> {
  const response = await fetch(`${restUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined
        ? {}
        : { 'content-type': typeof body === 'string' ? 'application/yaml' : 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as Record<string, unknown> };
}

/** Polls `probe` every 100 ms until it yields a value; a timeout's error ends with `context()` (recent logs). */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  context: () => string = () => '',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${context()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The calls most end-to-end tests make of a local stack, as its operator unless told: the stack is
 * read when a call is made, so the client can be made before the stack starts. Timeouts end with
 * the last 30 lines of `log`.
 */
export function stackClient(stackOf: () => LocalStack, log: readonly string[]) {
  const api = (method: string, path: string, body?: unknown, as?: string) => {
    const stack = stackOf();
    return callApi(stack.restUrl, as ?? stack.issuer.tokens.operator ?? '', method, path, body);
  };
  const waitFor = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000) =>
    until(what, probe, timeoutMs, () => log.slice(-30).join('\n'));
  return {
    api,
    until: waitFor,
    /** Registers a runbook; anything but success fails the test with the reply. */
    async register(doc: Record<string, unknown>): Promise<void> {
      const response = await api('POST', '/runbooks', doc);
      expect(response.status, JSON.stringify(response.body)).toBeLessThan(300);
    },
    /** Starts a run of the runbook and answers its id. */
    async startRun(runbookId: string): Promise<string> {
      const response = await api('POST', '/runs', { runbookId });
      expect(response.status).toBe(202);
      return String(response.body.runId);
    },
    async events(runId: string): Promise<RunEvent[]> {
      return (await api('GET', `/runs/${runId}/events?limit=1000`)).body.events as RunEvent[];
    },
    /** The run's detail once it has ended (or paused for an operator). */
    async finished(runId: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
      return waitFor(
        `run ${runId} to end`,
        async () => {
          const { body } = await api('GET', `/runs/${runId}`);
          return ['succeeded', 'failed', 'cancelled', 'paused'].includes(String(body.status)) ? body : undefined;
        },
        timeoutMs,
      );
    },
  };
}

import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { ROUTES } from '../../shared/resources/routes.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { callApi } from '../support/stack-api.js';

/** Hostile requests sent; the run stops earlier when the time budget is spent. */
const REQUESTS = Number(process.env.CAPSTAN_FUZZ_REQUESTS ?? 2500);
const BUDGET_MS = 45_000;
const SEED = Number(process.env.CAPSTAN_FUZZ_SEED ?? Date.now() % 2 ** 31);

let stack: LocalStack;
let home: string;
let port: number;
let tokens: Record<string, string>;
let runId = 'run-00000000-0000-4000-8000-000000000000';

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-fuzz-'));
  port = await freePortBlock();
  stack = await startLocalStack({
    port,
    stateDir: home,
    fresh: true,
    workers: {},
    reconcileIntervalMs: 60_000,
    log: () => undefined,
  });
  tokens = stack.issuer.tokens;
  const operator = tokens.operator ?? '';
  await callApi(stack.restUrl, operator, 'POST', '/runbooks', {
    name: 'fuzz',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    inputs: { s: { type: 'string', default: 'x' } },
    steps: [{ id: 'a', backend: 'test', action: 'echo', params: { message: '{{ inputs.s }}' } }],
  });
  const run = await callApi(stack.restUrl, operator, 'POST', '/runs', { runbookId: 'fuzz' });
  if (typeof run.body.runId === 'string') runId = run.body.runId;
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

interface Hostile {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
const segment = fc.oneof(
  fc.constantFrom(
    '%ZZ',
    '%',
    '%E0%A4%A',
    '%00',
    '..',
    '%2F',
    '%C0%AF',
    'run-',
    'x'.repeat(3000),
    '%F0%9F%99%82',
    '%E2%80%AE',
    '%F0%9F',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }).map(encodeURIComponent),
  fc.constant('{id}'),
);
const body = fc.oneof(
  fc.constantFrom(
    '',
    '{',
    'null',
    '[]',
    '"x"',
    '{"runbookId":"fuzz","inputs":{"s":1e308}}',
    '{"runbookId":"fuzz","inputs":{"s":9007199254740993}}',
    '{"runbookId":"fuzz","inputs":{"s":"\\ufffe"}}',
    '{"runbookId":"fuzz","inputs":{"s":"\\udc00"}}',
    '{"runbookId":"fuzz","inputs":{"__proto__":{"x":1}}}',
    '{"runbookId":"fuzz","inputs":{"":1}}',
    '{"decision":"approve","notes":"\\u0000"}',
    '{"directive":"retry"}',
    `{"runbookId":"fuzz","inputs":{"s":${deep(3000)}}}`,
    deep(6000),
    'a: &a [1]\nb: [*a, *a]\n',
    `name: x\nsteps: ${deep(2000)}`,
  ),
  fc.json({ maxDepth: 4 }),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc
    .integer({ min: 1, max: 4 })
    .map((n) => `{"runbookId":"${'x'.repeat(n * 100)}","inputs":{"s":"${'y'.repeat(n * 200_000)}"}}`),
);
const query = fc.oneof(
  fc.constant(''),
  fc.constantFrom(
    '?cursor=%ZZ',
    '?cursor=eyJwayI6MX0',
    '?limit=-1',
    '?limit=1e9',
    '?since=abc',
    '?status=x',
    '?token=abc',
    '?a=1&a=2',
    '?%ZZ=1',
    '?cursor=' + 'A'.repeat(5000),
  ),
  fc.string({ maxLength: 30 }).map((s) => `?q=${encodeURIComponent(s)}`),
);
const auth = fc.constantFrom('operator', 'admin', 'approver', 'otherTenant', 'none', 'garbage', 'expired', 'basic');
const contentType = fc.constantFrom(
  'application/json',
  'application/yaml',
  'text/plain',
  'application/json; charset=utf-16',
  '',
  'multipart/form-data; boundary=x',
);
const method = fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS');

function tokenHeader(kind: string): Record<string, string> {
  switch (kind) {
    case 'none':
      return {};
    case 'garbage':
      return { authorization: 'Bearer a.b.c' };
    case 'basic':
      return { authorization: 'Basic YTpi' };
    case 'expired':
      // A well-formed token whose signature cannot match: the authorizer must refuse it as any other.
      return { authorization: `Bearer ${(tokens.operator ?? '').slice(0, -4)}AAAA` };
    default:
      return { authorization: `Bearer ${tokens[kind] ?? ''}` };
  }
}

const hostile: fc.Arbitrary<Hostile> = fc
  .record({
    route: fc.constantFrom(...ROUTES, undefined),
    segments: fc.array(segment, { minLength: 2, maxLength: 2 }),
    method,
    useRouteMethod: fc.boolean(),
    body: fc.option(body, { nil: undefined }),
    query,
    auth,
    contentType,
  })
  .map((r) => {
    const template = r.route?.path ?? `/v1/${r.segments[0] ?? ''}`;
    let i = 0;
    const path = template.replace(/\{[^}]+\}/g, () => {
      const s = r.segments[i++] ?? 'x';
      return s === '{id}' ? runId : s;
    });
    return {
      method: r.useRouteMethod && r.route ? r.route.method : r.method,
      path: `${path}${r.query}`,
      headers: { ...tokenHeader(r.auth), ...(r.contentType ? { 'content-type': r.contentType } : {}) },
      ...(r.body === undefined ? {} : { body: r.body }),
    };
  });

function send(h: Hostile): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: h.method, path: h.path, headers: h.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error(`timeout on ${h.method} ${h.path.slice(0, 80)}`)));
    req.on('error', reject);
    req.end(h.body);
  });
}

function inErrorShape(text: string): boolean {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    return (
      Object.keys(parsed).length === 1 &&
      typeof parsed.error?.code === 'string' &&
      typeof parsed.error.message === 'string'
    );
  } catch {
    return false;
  }
}

describe('the REST API under hostile requests', () => {
  it('answers every one with a 2xx or a 4xx in the error shape, never a 5xx', async () => {
    console.log(`fuzz seed ${SEED} (CAPSTAN_FUZZ_SEED=${SEED} reproduces it)`);
    const samples = fc.sample(hostile, { seed: SEED, numRuns: REQUESTS });
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    const started = Date.now();
    let sent = 0;
    for (let at = 0; at < samples.length && Date.now() - started < BUDGET_MS; at += 8) {
      const batch = samples.slice(at, at + 8);
      const replies = await Promise.all(batch.map(send));
      replies.forEach((reply, k) => {
        const h = batch[k] as Hostile;
        sent += 1;
        statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
        const bad = reply.status >= 500 || (reply.status >= 300 && !inErrorShape(reply.text));
        if (bad && failures.length < 10) {
          failures.push(
            `${reply.status} ${h.method} ${h.path.slice(0, 100)} body=${(h.body ?? '').slice(0, 80)} -> ${reply.text.slice(0, 200)}`,
          );
        }
      });
    }
    const figures = [...statuses.entries()]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}:${n}`)
      .join(' ');
    console.log(`fuzz: ${sent} requests in ${Date.now() - started} ms; statuses ${figures}`);
    expect(failures, `seed ${SEED}`).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(Math.min(REQUESTS, 2000));
  }, 90_000);
});

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { importJWK, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { ROUTES } from '../../shared/resources/routes.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { callApi, until } from '../support/stack-api.js';

let stack: LocalStack;
let home: string;
let port: number;
let base: string;
let operator: string;
let admin: string;
let otherAdmin: string;
const log: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-trust-'));
  port = await freePortBlock();
  stack = await startLocalStack({
    port,
    stateDir: home,
    fresh: true,
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 60_000,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '1' },
    log: (line) => log.push(line),
  });
  base = `http://127.0.0.1:${port}`;
  operator = stack.issuer.tokens.operator ?? '';
  admin = stack.issuer.tokens.admin ?? '';
  otherAdmin = stack.issuer.tokens.otherTenant ?? '';
  const registered = await callApi(stack.restUrl, operator, 'POST', '/runbooks', {
    name: 'trust',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    inputs: { x: { type: 'object', required: false }, s: { type: 'string', required: false } },
    steps: [{ id: 'hello', backend: 'test', action: 'echo', params: { message: 'hi' } }],
  });
  expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

/** A raw request: the body as given (a string stays exactly that text), the reply parsed if it is JSON. */
async function raw(method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.status, body: json as { error?: { code: string; message: string; details?: unknown } } };
}

const createRun = (bodyText: string) => raw('POST', '/v1/runs', bodyText);
const paths = (body: { error?: { details?: unknown } }) =>
  ((body.error?.details ?? []) as Array<{ path: string }>).map((d) => d.path);

/** A token signed with the local issuer's key, with the claims given (and no others). */
async function signed(claims: Record<string, unknown>): Promise<string> {
  const jwk = JSON.parse(readFileSync(join(home, 'issuer-key.json'), 'utf8')) as JWK;
  return new SignJWT({ tenant: 'local', roles: ['operator'], ...claims })
    .setProtectedHeader({ alg: 'ES256', kid: 'capstan-local' })
    .setSubject('mallory')
    .setIssuer(`${base}/`)
    .setAudience('capstan')
    .sign(await importJWK(jwk, 'ES256'));
}

function connectStatus(url: string): Promise<number> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url);
    socket.once('open', () => {
      socket.close();
      resolve(101);
    });
    socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.once('error', () => resolve(0));
  });
}

describe('tokens', () => {
  const now = () => Math.floor(Date.now() / 1000);

  it('refuses a validly signed token without exp on REST and on the WebSocket connect', async () => {
    const token = await signed({ iat: now() });
    const reply = await callApi(stack.restUrl, token, 'GET', '/runs');
    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ error: { code: 'UNAUTHORIZED', message: expect.any(String) } });
    expect(await connectStatus(`${stack.wsUrl}?token=${token}`)).toBe(401);
    expect(await connectStatus(`${stack.wsUrl}?token=${operator}`)).toBe(101);
  });

  it('refuses a token that lives longer than the maximum lifetime', async () => {
    const token = await signed({ iat: now(), exp: now() + 25 * 3600 });
    expect((await callApi(stack.restUrl, token, 'GET', '/runs')).status).toBe(401);
    expect(await connectStatus(`${stack.wsUrl}?token=${token}`)).toBe(401);
  });

  it('takes a REST token from the Authorization header only, never from ?token=', async () => {
    const response = await fetch(`${stack.restUrl}/runs?token=${operator}`);
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
  });
});

describe('bad input is a 4xx in the error shape', () => {
  it('answers a malformed % escape in any path parameter with 400', async () => {
    const withParams = ROUTES.filter((route) => route.path.includes('{'));
    expect(withParams.length).toBeGreaterThanOrEqual(8);
    for (const route of withParams) {
      const path = route.path.replace(/\{[^}]+\}/g, '%ZZ');
      const reply = await raw(route.method, path, route.method === 'GET' ? undefined : '{}');
      expect(reply.status, `${route.method} ${path}`).toBe(400);
      expect(reply.body.error?.code).toBe('VALIDATION_FAILED');
    }
    const management = await raw('POST', '/ws/@connections/%ZZ', 'x');
    expect(management.status).toBe(400);
    expect(management.body.error?.code).toBe('VALIDATION_FAILED');
  });

  it('refuses a forged cursor and never pages into another tenant', async () => {
    for (const list of ['/v1/runs', '/v1/runbooks']) {
      const forged = Buffer.from(JSON.stringify({ pk: 'X', gsi1pk: 'TENANT#other' })).toString('base64url');
      for (const cursor of [forged, 'not a cursor', '%%%', 'A'.repeat(5000)]) {
        const reply = await raw('GET', `${list}?cursor=${encodeURIComponent(cursor)}`);
        expect(reply.status, `${list} ${cursor.slice(0, 20)}`).toBe(400);
        expect(paths(reply.body)).toEqual(['cursor']);
      }
    }
    for (const name of ['theirs-a', 'theirs-b']) {
      const doc = {
        name,
        environment: 'dev',
        sandbox_profile: 'dev-flex',
        steps: [{ id: 'a', backend: 'test', action: 'echo', params: { message: 'x' } }],
      };
      expect((await callApi(stack.restUrl, otherAdmin, 'POST', '/runbooks', doc)).status).toBeLessThan(300);
    }
    const theirs = await callApi(stack.restUrl, otherAdmin, 'GET', '/runbooks?limit=1');
    const cursor = String(theirs.body.nextCursor);
    const mine = await callApi(stack.restUrl, operator, 'GET', `/runbooks?cursor=${cursor}`);
    expect(mine.status).toBe(200);
    const ids = (mine.body.items as Array<{ runbookId?: string; id?: string }>).map((i) => i.runbookId ?? i.id);
    expect(ids).not.toContain('theirs-a');
    expect(ids).not.toContain('theirs-b');
  });

  it('refuses YAML that expands too many aliases', async () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]'];
    for (let i = 0; i < 8; i++) {
      const prev = String.fromCharCode(97 + i);
      const next = String.fromCharCode(98 + i);
      lines.push(`${next}: &${next} [${Array.from({ length: 10 }, () => `*${prev}`).join(',')}]`);
    }
    const reply = await raw('POST', '/v1/runbooks', lines.join('\n'), { 'content-type': 'application/yaml' });
    expect(reply.status).toBe(400);
    expect(JSON.stringify(reply.body)).toMatch(/alias/);
  });

  it('refuses a runbook of 10,000 steps, naming steps', async () => {
    const steps = Array.from({ length: 10_000 }, (_, i) => ({
      id: `s${i}`,
      backend: 'test',
      action: 'echo',
      params: { message: 'x' },
    }));
    const reply = await raw(
      'POST',
      '/v1/runbooks',
      JSON.stringify({ name: 'huge', environment: 'dev', sandbox_profile: 'dev-flex', steps }),
    );
    expect(reply.status).toBe(400);
    expect(paths(reply.body)).toContain('steps');
  });

  it('refuses inputs that DynamoDB or SQS cannot take, naming the field', async () => {
    const cases: Array<[string, string]> = [
      [`{"runbookId":"trust","inputs":{"s":"${'x'.repeat(900_000)}"}}`, 'inputs'],
      [`{"runbookId":"trust","inputs":{"x":${'{"a":'.repeat(40)}1${'}'.repeat(40)}}}`, 'inputs.x'],
      [`{"runbookId":"trust","inputs":{"x":${'['.repeat(5000)}${']'.repeat(5000)}}}`, 'body'],
      ['{"runbookId":"trust","inputs":{"x":{"n":9007199254740993}}}', 'inputs.x.n'],
      ['{"runbookId":"trust","inputs":{"x":{"n":1e308}}}', 'inputs.x.n'],
      ['{"runbookId":"trust","inputs":{"x":{"n":5e-324}}}', 'inputs.x.n'],
      ['{"runbookId":"trust","inputs":{"x":{"":1}}}', 'inputs.x.'],
      ['{"runbookId":"trust","inputs":{"x":{"__proto__":{"admin":true}}}}', 'inputs.x.__proto__'],
      ['{"runbookId":"trust","inputs":{"__proto__":{"admin":true}}}', 'inputs.__proto__'],
      ['{"runbookId":"trust","inputs":{"s":"bad \\ufffe"}}', 'inputs.s'],
      ['{"runbookId":"trust","inputs":{"s":"lone \\ud800"}}', 'inputs.s'],
    ];
    for (const [body, field] of cases) {
      const reply = await createRun(body);
      expect(reply.status, `${body.slice(0, 60)} -> ${JSON.stringify(reply.body).slice(0, 300)}`).toBe(400);
      expect(
        paths(reply.body).some((p) => p.startsWith(field)),
        JSON.stringify(reply.body).slice(0, 300),
      ).toBe(true);
    }
  });

  it('answers a body past 10 MB with 413 and oversized headers with 431, both in the error shape', async () => {
    const big = await raw('POST', '/v1/runs', 'x'.repeat(10 * 1024 * 1024 + 1));
    expect(big.status).toBe(413);
    expect(big.body.error?.code).toBe('PAYLOAD_TOO_LARGE');
    const headers = await raw('GET', '/v1/runs', undefined, { 'x-padding': 'p'.repeat(20_000) });
    expect(headers.status).toBe(431);
    expect(headers.body.error?.code).toBe('HEADERS_TOO_LARGE');
    const gone = await raw('POST', '/ws/@connections/nobody', 'x');
    expect(gone.status).toBe(410);
    expect(gone.body.error?.code).toBe('GONE');
  });
});

describe('workers are fleet infrastructure', () => {
  it("hides the fleet from another tenant, and only the platform tenant's operators drain", async () => {
    const [worker] = await until('a live worker', async () => {
      const listed = await callApi(stack.restUrl, admin, 'GET', '/workers');
      const live = (listed.body.workers as Array<{ workerId: string; status: string }>).filter(
        (w) => w.status === 'idle',
      );
      return live.length > 0 ? live : undefined;
    });
    const workerId = worker?.workerId ?? '';

    const list = await callApi(stack.restUrl, otherAdmin, 'GET', '/workers');
    expect(list.status).toBe(403);
    expect(JSON.stringify(list.body)).not.toContain(workerId);
    const drain = await callApi(stack.restUrl, otherAdmin, 'POST', `/workers/${workerId}/drain`);
    const unknown = await callApi(stack.restUrl, otherAdmin, 'POST', '/workers/no-such-worker/drain');
    expect(drain.status).toBe(403);
    expect(unknown).toEqual(drain); // the same answer whether the worker exists or not
    const stillThere = await callApi(stack.restUrl, operator, 'GET', '/workers');
    expect(stillThere.body.workers).toContainEqual(expect.objectContaining({ workerId, status: 'idle' }));

    const drained = await callApi(stack.restUrl, operator, 'POST', `/workers/${workerId}/drain`);
    expect(drained.status).toBe(202);
    await until('the worker to deregister', async () => {
      const listed = await callApi(stack.restUrl, operator, 'GET', '/workers');
      const found = (listed.body.workers as Array<{ workerId: string; status: string }>).find(
        (w) => w.workerId === workerId,
      );
      return found?.status === 'deregistered' ? true : undefined;
    });
  });
});

describe('local listeners', () => {
  it('binds every local service to 127.0.0.1', async () => {
    const ports = [0, 1, 2, 3, 4, 5].map((offset) => port + offset);
    const listening = execFileSync('ss', ['-ltnH'], { encoding: 'utf8' })
      .split('\n')
      .map((line) => line.trim().split(/\s+/)[3] ?? '')
      .filter((address) => ports.some((p) => address.endsWith(`:${p}`)));
    expect(listening).toHaveLength(ports.length);
    for (const address of listening) expect(address).toMatch(/^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):\d+$/);
    const external = Object.values(networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    if (external) {
      for (const p of ports) {
        const reached = await new Promise<boolean>((resolve) => {
          const socket = connect({ host: external, port: p });
          socket.once('connect', () => {
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => resolve(false));
        });
        expect(reached, `${external}:${p}`).toBe(false);
      }
    }
  });
});

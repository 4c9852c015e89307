import { describe, expect, it } from 'vitest';
import { runCli } from '../../../cli/main.js';

interface Sent {
  method: string;
  url: string;
  body?: unknown;
}

/** Runs the CLI against a fake API answering `routes` ("METHOD /path" -> [status, body]). */
async function cli(argv: string[], routes: Record<string, [number, unknown]> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const sent: Sent[] = [];
  const fakeFetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const method = init?.method ?? 'GET';
    sent.push({
      method,
      url: String(input),
      ...(init?.body !== undefined && { body: JSON.parse(String(init.body)) as unknown }),
    });
    const answer = routes[`${method} ${url.pathname}`];
    if (!answer) throw new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } });
    return new Response(JSON.stringify(answer[1]), { status: answer[0] });
  }) as typeof fetch;
  const code = await runCli(argv, {
    env: { CAPSTAN_URL: 'http://api.test', CAPSTAN_TOKEN: 'tok' },
    cwd: '/nowhere',
    isTTY: false,
    write: (t) => out.push(t),
    writeError: (t) => err.push(t),
    fetch: fakeFetch,
  });
  return { code, out: out.join(''), err: err.join(''), sent };
}

const node = (id: string, source: string, status: string) => ({
  id,
  tenantId: 't',
  groups: ['web'],
  attributes: source === 'declared' ? { host: '10.0.0.5' } : {},
  source,
  status,
  lastSeen: new Date().toISOString(),
});

describe('capstan inventory', () => {
  it('lists a group as a table with source and status', async () => {
    const result = await cli(['inventory', 'list', '--group', 'web'], {
      'GET /v1/inventory': [200, { nodes: [node('web-1', 'agent', 'online'), node('db-1', 'declared', 'online')] }],
    });
    expect(result.code).toBe(0);
    expect(result.sent[0]?.url).toBe('http://api.test/v1/inventory?group=web');
    const lines = result.out.trim().split('\n');
    expect(lines[0]).toMatch(/^NODE\s+SOURCE\s+STATUS\s+GROUPS\s+ATTRIBUTES/);
    expect(lines[1]).toMatch(/^web-1\s+agent\s+online\s+web\s+-/);
    expect(lines[2]).toMatch(/^db-1\s+declared\s+online\s+web\s+host=10\.0\.0\.5/);
  });

  it('declares a node with repeated groups and attributes', async () => {
    const result = await cli(['inventory', 'put', 'db-1', '--group', 'db', '--group', 'eu', '--attr', 'host=a=b'], {
      'PUT /v1/inventory/nodes/db-1': [
        201,
        { node: { ...node('db-1', 'declared', 'online'), groups: ['db', 'eu'] }, created: true },
      ],
    });
    expect(result.code).toBe(0);
    expect(result.sent[0]?.body).toEqual({ groups: ['db', 'eu'], attributes: { host: 'a=b' } });
    expect(result.out).toBe('node db-1: declared in db, eu\n');
  });

  it('exits 2 for an attribute that is not key=value, before calling the API', async () => {
    const result = await cli(['inventory', 'put', 'db-1', '--attr', 'oops']);
    expect(result.code).toBe(2);
    expect(result.sent).toEqual([]);
  });

  it('removes a node and prints JSON with --json', async () => {
    const result = await cli(['inventory', 'rm', 'db-1', '--json'], {
      'DELETE /v1/inventory/nodes/db-1': [200, { id: 'db-1', removed: true }],
    });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.out)).toEqual({ id: 'db-1', removed: true });
  });

  it('exits 3 when the node is not there', async () => {
    const result = await cli(['inventory', 'rm', 'ghost'], {
      'DELETE /v1/inventory/nodes/ghost': [
        404,
        { error: { code: 'NOT_FOUND', message: "no node 'ghost' in the inventory" } },
      ],
    });
    expect(result.code).toBe(3);
    expect(result.err).toContain('NOT_FOUND');
  });
});

import { describe, expect, it } from 'vitest';
import type { Command } from 'commander';
import { buildProgram, runCli } from '../../../cli/main.js';

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
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
      headers: init?.headers as Record<string, string>,
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

const RUNBOOK = {
  tenantId: 't',
  runbookId: 'scale',
  version: 2,
  digest: 'd',
  createdAt: '2026-01-01T00:00:00.000Z',
  createdBy: 'me',
  definition: { inputs: { replicas: { type: 'number' }, service: { type: 'string' } } },
};

describe('the capstan program', () => {
  it('starts a run with typed inputs, a ticket, a priority and an idempotency key', async () => {
    const result = await cli(
      ['run', 'scale', '--input', 'replicas=3', '-i', 'service=web', '--ticket', 'INC-7', '--priority', 'high'],
      {
        'GET /v1/runbooks/scale': [200, RUNBOOK],
        'POST /v1/runs': [202, { runId: 'run-1', status: 'queued' }],
      },
    );
    expect(result.code).toBe(0);
    const post = result.sent.find((s) => s.method === 'POST');
    expect(post?.body).toEqual({
      runbookId: 'scale',
      inputs: { replicas: 3, service: 'web' },
      ticket: { id: 'INC-7', source: 'cli' },
      priority: 'high',
    });
    expect(post?.headers['Idempotency-Key']).toMatch(/^cli-/);
    expect(post?.headers.authorization).toBe('Bearer tok');
    expect(result.out).toBe('run run-1 queued\n');
  });

  it('exits 2 for a priority that does not exist, before calling the API', async () => {
    const result = await cli(['run', 'scale', '--priority', 'urgent']);
    expect(result.code).toBe(2);
    expect(result.err).toContain('Allowed choices are low, normal, high, emergency');
    expect(result.sent).toEqual([]);
  });

  it('exits 2 for an input its declared type cannot take', async () => {
    const result = await cli(['run', 'scale', '--input', 'replicas=many'], {
      'GET /v1/runbooks/scale': [200, RUNBOOK],
    });
    expect(result.code).toBe(2);
    expect(result.err).toContain('--input replicas=many: not a number');
  });

  it('exits 2 when resume has no directive', async () => {
    expect((await cli(['runs', 'resume', 'run-1'])).code).toBe(2);
  });

  it('prints an API error as one line with what to do next, and exits 3', async () => {
    const result = await cli(['runs', 'cancel', 'run-1'], {
      'POST /v1/runs/run-1/cancel': [409, { error: { code: 'CONFLICT', message: "run 'run-1' has already ended" } }],
    });
    expect(result.code).toBe(3);
    expect(result.err.trim().split('\n')).toEqual(["capstan: API error CONFLICT: run 'run-1' has already ended"]);
  });

  it('passes replay to the API and reports its refusal as an API error', async () => {
    const result = await cli(['runs', 'replay', 'run-1'], {
      'POST /v1/runs/run-1/replay': [
        404,
        { error: { code: 'NOT_FOUND', message: 'no route for POST /v1/runs/run-1/replay' } },
      ],
    });
    expect(result.code).toBe(3);
    expect(result.sent[0]?.body).toEqual({ reason: 'replayed from the CLI' });
    expect(result.err).toContain('API error NOT_FOUND');
  });

  it('exits 3 with a hint when the API cannot be reached', async () => {
    const result = await cli(['workers', 'list']);
    expect(result.code).toBe(3);
    expect(result.err).toMatch(/cannot reach http:\/\/api.test\/v1 \(ECONNREFUSED\).*npm start/);
  });

  it('prints the error as JSON on stderr with --json', async () => {
    const result = await cli(['--json', 'workers', 'drain', 'w1'], {
      'POST /v1/workers/w1/drain': [404, { error: { code: 'NOT_FOUND', message: 'no live worker' } }],
    });
    expect(result.code).toBe(3);
    expect(JSON.parse(result.err)).toEqual({ error: { code: 'NOT_FOUND', message: 'no live worker' } });
  });

  it('lists workers as an aligned table when piped, without colour', async () => {
    const worker = {
      workerId: 'dev-flex-a',
      hostname: 'h',
      pid: 1,
      sandboxProfile: 'dev-flex',
      environment: 'dev',
      backends: {},
      groups: [],
      version: '0.1.0',
      status: 'idle',
      registeredAt: '2026-01-01T00:00:00.000Z',
      lastHeartbeatAt: '2026-01-01T00:00:00.000Z',
      stats: { cpuPercent: 1.2, rssBytes: 104_857_600, tasksCompleted: 4 },
      drainRequested: false,
      missedBeats: 0,
      secondsSinceHeartbeat: 3,
    };
    const result = await cli(['workers', 'list'], { 'GET /v1/workers': [200, { workers: [worker] }] });
    expect(result.code).toBe(0);
    expect(result.out.split('\n')[0]).toMatch(/^NAME\s+PROFILE\s+STATUS\s+STEP\s+HEARTBEAT/);
    expect(result.out).toContain('dev-flex-a  dev-flex  idle');
    expect(result.out).not.toContain('\u001b[');
  });

  it('sets a quota with PUT, or merges it with PATCH, from typed options', async () => {
    const quota = {
      runbook: 'web',
      maxActive: 3,
      emergency: { maxActive: 1 },
      tenantId: 't',
      updatedAt: '2026-01-01T00:00:00.000Z',
      updatedBy: 'ada',
    };
    const put = await cli(['quotas', 'set', 'web', '--max-active', '3', '--emergency-max-active', '1'], {
      'PUT /v1/quotas/web': [200, quota],
    });
    expect(put.code).toBe(0);
    expect(put.sent[0]?.body).toEqual({ runbook: 'web', maxActive: 3, emergency: { maxActive: 1 } });
    expect(put.out).toContain('quota on web: max active 3');
    const patch = await cli(['quotas', 'set', '*', '--burst', '5', '--merge'], {
      'PATCH /v1/quotas/*': [200, { ...quota, runbook: '*', burst: 5 }],
    });
    expect(patch.sent[0]).toMatchObject({ method: 'PATCH', body: { burst: 5 } });
    expect((await cli(['quotas', 'set', 'web', '--max-active', 'lots'])).code).toBe(2);
  });

  it('pauses, throttles and lists sources, and refuses a pause without a reason', async () => {
    const paused = await cli(['limits', 'pause', 'webhook:jira', '--reason', 'storm'], {
      'POST /v1/limits/pause': [200, { source: 'webhook:jira' }],
    });
    expect(paused.code).toBe(0);
    expect(paused.sent[0]?.body).toEqual({ source: 'webhook:jira', reason: 'storm' });
    const throttled = await cli(
      ['limits', 'throttle', 'web', '--max-per-minute', '6', '--until', '2026-12-01T00:00:00Z', '--reason', 'r'],
      { 'POST /v1/limits/throttle': [200, { source: 'web' }] },
    );
    expect(throttled.sent[0]?.body).toEqual({
      source: 'web',
      maxPerMinute: 6,
      until: '2026-12-01T00:00:00Z',
      reason: 'r',
    });
    expect((await cli(['limits', 'pause', 'web'])).code).toBe(2);
    const limit = {
      kind: 'pause',
      tenantId: 't',
      source: 'webhook:jira',
      reason: 'storm',
      by: 'olive',
      at: '2026-01-01T00:00:00.000Z',
    };
    const listed = await cli(['limits', 'list'], { 'GET /v1/limits': [200, { limits: [limit] }] });
    expect(listed.out).toMatch(/^SOURCE\s+CONTROL/);
    expect(listed.out).toContain('webhook:jira  pause');
  });

  it('lists breakers, resets one with a reason, and acknowledges an incident', async () => {
    const breaker = {
      runbookId: 'web',
      state: 'open',
      outcomes: [],
      openedAt: '2026-01-01T00:00:00.000Z',
      openUntil: '2026-01-01T00:01:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
    };
    const listed = await cli(['breakers', 'list'], { 'GET /v1/breakers': [200, { breakers: [breaker] }] });
    expect(listed.out).toContain('web      open');
    const reset = await cli(['breakers', 'reset', 'web', '--reason', 'fixed'], {
      'POST /v1/breakers/web/reset': [200, { ...breaker, state: 'closed', openUntil: '' }],
    });
    expect(reset.sent[0]?.body).toEqual({ reason: 'fixed' });
    expect(reset.out).toContain('web: breaker closed');
    const ack = await cli(['--json', 'incidents', 'ack', 'run-1'], {
      'POST /v1/runs/run-1/incident/ack': [
        200,
        { raisedAt: '2026-01-01T00:00:00.000Z', reason: 'run_failed', acknowledgedBy: 'olive' },
      ],
    });
    expect(ack.code).toBe(0);
    expect(JSON.parse(ack.out)).toMatchObject({ acknowledgedBy: 'olive' });
  });

  it('has an example in the help of every command', () => {
    const program = buildProgram({ env: {}, cwd: '/', isTTY: false });
    const all = (command: Command): Command[] => [command, ...command.commands.flatMap(all)];
    for (const command of all(program)) {
      let help = '';
      command.configureOutput({ writeOut: (t) => (help += t) });
      command.outputHelp();
      expect(help, command.name()).toMatch(/Examples?:\n {2}\$ capstan /);
    }
  });
});

import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { ROUTES } from '../../shared/resources/routes.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { until } from '../support/stack-api.js';

/**
 * The `capstan` binary as a user runs it, as a subprocess against the local stack. It finds the
 * stack through `.capstan/local.json` in a parent of its working directory.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'capstan.mjs');
let stack: LocalStack;
let home: string;
let cwd: string;
const log: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-cli-'));
  stack = await startLocalStack({
    port: await freePortBlock(),
    stateDir: join(home, 'stack'),
    fresh: true,
    workers: { 'dev-flex': 2, 'prod-standard': 1 },
    // The CLI's `reconcile` forces the sweeps this test sees.
    reconcileIntervalMs: 600_000,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '2' },
    log: (line) => log.push(line),
  });
  mkdirSync(join(home, 'project', '.capstan'), { recursive: true });
  copyFileSync(join(home, 'stack', 'local.json'), join(home, 'project', '.capstan', 'local.json'));
  cwd = join(home, 'project', 'runbooks');
  mkdirSync(cwd);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Starts `capstan <args>`; `lines` sees stdout as it comes. */
function start(args: string[], env: Record<string, string> = {}) {
  const { CAPSTAN_URL: _u, CAPSTAN_TOKEN: _t, CAPSTAN_WS_URL: _w, ...inherited } = process.env;
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { ...inherited, NO_COLOR: '1', ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<Finished>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { done, stdout: () => stdout };
}

const capstan = (args: string[], env: Record<string, string> = {}) => start(args, env).done;
const file = (name: string, text: string) => {
  writeFileSync(join(cwd, name), text);
  return name;
};
const RUN_ID = /run-[0-9a-f-]{36}/;

describe('the capstan CLI on the local stack', () => {
  it('validates a runbook offline: exit 0 for a good one, 1 with line and column for a bad one', async () => {
    const good = await capstan(['runbooks', 'validate', join(ROOT, 'examples', 'runbooks', 'hello.yaml')]);
    expect(good.code, good.stderr).toBe(0);
    expect(good.stdout).toContain('valid (runbook hello, 3 step(s)');
    const bad = await capstan([
      'runbooks',
      'validate',
      file(
        'bad.yaml',
        'name: bad\nenvironment: dev\nsandbox_profile: dev-flex\nsteps:\n  - id: a\n    backend: test\n    action: echo\n    timeout: 10 minutes\n',
      ),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("bad.yaml:8:14: steps[0].timeout: '10 minutes' is not a duration");
  });

  it('pushes a runbook and runs it with --wait to success, exit 0', async () => {
    const push = await capstan(['runbooks', 'push', join(ROOT, 'examples', 'runbooks', 'hello.yaml')]);
    expect(push.code, push.stderr).toBe(0);
    expect(push.stdout).toMatch(/runbook hello version 1 registered/);
    const again = await capstan(['runbooks', 'push', join(ROOT, 'examples', 'runbooks', 'hello.yaml')]);
    expect(again.stdout).toContain('version 1 unchanged');

    const run = await capstan(['run', 'hello', '--input', 'who=cli', '--wait']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/started\s+greet/);
    expect(run.stdout).toContain('greet | hello, cli');
    expect(run.stdout).toMatch(/run run-[0-9a-f-]{36} succeeded in/);

    const list = await capstan(['runbooks', 'list', '--json']);
    expect(JSON.parse(list.stdout).runbooks).toEqual([
      expect.objectContaining({ runbookId: 'hello', latestVersion: 1 }),
    ]);
  });

  it('runs a failing runbook with --wait to exit 1 with the reason, and shows it', async () => {
    const push = await capstan([
      'runbooks',
      'push',
      file(
        'fails.json',
        JSON.stringify({
          name: 'fails',
          environment: 'dev',
          sandbox_profile: 'dev-flex',
          steps: [{ id: 'boom', backend: 'test', action: 'fail', params: { message: 'the disk is full' } }],
        }),
      ),
    ]);
    expect(push.code, push.stderr).toBe(0);
    const run = await capstan(['run', 'fails', '--wait']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/failed\s+boom: .*the disk is full/);
    expect(run.stderr).toMatch(/capstan: run run-[0-9a-f-]{36} failed: .*the disk is full/);

    const runId = RUN_ID.exec(run.stdout)?.[0] ?? '';
    const show = await capstan(['runs', 'show', runId]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/Status:\s+failed/);
    expect(show.stdout).toMatch(/Reason:\s+.*the disk is full/);
    expect(show.stdout).toMatch(/^boom\s+main\s+test\.fail\s+failed\s+1/m);
    const json = JSON.parse((await capstan(['runs', 'show', runId, '--json'])).stdout);
    expect(json).toMatchObject({ runId, status: 'failed' });
    const listed = await capstan(['runs', 'list', '--status', 'failed']);
    expect(listed.stdout).toContain(runId);
  });

  it('waits on a gate, printing the command that decides it, while a second process approves', async () => {
    await capstan([
      'runbooks',
      'push',
      file(
        'gated.yaml',
        'name: gated\nenvironment: prod\nsandbox_profile: prod-standard\nsteps:\n  - id: rotate\n    backend: test\n    action: echo\n    params: { message: rotated }\n    blast_radius: high\n',
      ),
    ]);
    const waiting = start(['run', 'gated', '--wait']);
    const command = await until(
      'the approve command',
      async () => /capstan approve (run-[0-9a-f-]{36}) (\S+) --as approver/.exec(waiting.stdout()) ?? undefined,
      60_000,
      () => waiting.stdout() + log.slice(-20).join('\n'),
    );
    const [, runId = '', approvalId = ''] = command;
    const first = await capstan(['approve', runId, approvalId, '--as', 'approver', '--notes', 'looks right']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('approve recorded; 1/2 approvals');
    const byOperator = await capstan(['approve', runId, approvalId]);
    expect(byOperator.code).toBe(3);
    expect(byOperator.stderr).toContain('API error FORBIDDEN');
    const second = await capstan(['approve', runId, approvalId, '--as', 'approver2']);
    expect(second.stdout).toContain('gate approved');
    const done = await waiting.done;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toMatch(/gate\s+\S+ approved/);
    expect(done.stdout).toMatch(/succeeded\s+rotate/);
  });

  it('loses and repeats no event when the socket drops mid-run', async () => {
    const run = await capstan(['run', 'hello', '--wait', '--json'], { CAPSTAN_CLI_TEST_DROP_AFTER: '4' });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/stream dropped after event 4; reconnecting/);
    const lines = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const seqs = lines.flatMap((line) => (typeof line.seq === 'number' ? [line.seq] : []));
    const detail = lines.at(-1) ?? {};
    expect(detail).toMatchObject({ status: 'succeeded' });
    expect(seqs.length).toBeGreaterThan(8);
    expect(seqs).toEqual(seqs.map((_s, i) => i + 1));
    expect(seqs.at(-1)).toBe(detail.lastEventSeq);
  });

  it('forces a reconciler sweep as an admin and refuses an operator', async () => {
    const sweep = await capstan(['reconcile', '--as', 'admin', '--json']);
    expect(sweep.code, sweep.stderr).toBe(0);
    expect(JSON.parse(sweep.stdout)).toMatchObject({ deadWorkers: expect.any(Number), leasesExpired: 0 });
    const refused = await capstan(['reconcile']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('API error FORBIDDEN');
  });

  it('replays a finished run as a new run that names the original', async () => {
    const runs = JSON.parse((await capstan(['runs', 'list', '--status', 'succeeded', '--json'])).stdout) as {
      runs: Array<{ runId: string }>;
    };
    const original = runs.runs[0]?.runId ?? '';
    const replay = await capstan(['runs', 'replay', original, '--reason', 'audit drill']);
    expect(replay.code, replay.stderr).toBe(0);
    expect(replay.stdout).toMatch(new RegExp(`run run-[0-9a-f-]{36} replays ${original}`));
  });

  it('serves the OpenAPI document without a token, with every route', async () => {
    const response = await fetch(`${stack.restUrl}/openapi.json`);
    expect(response.status).toBe(200);
    const document = (await response.json()) as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(document.openapi).toBe('3.1.0');
    for (const route of ROUTES) expect(document.paths[route.path]?.[route.method.toLowerCase()]).toBeDefined();
  });

  it('lists workers as JSON and drains one', async () => {
    const listed = await capstan(['workers', 'list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const { workers } = JSON.parse(listed.stdout) as { workers: Array<{ workerId: string; sandboxProfile: string }> };
    const worker = workers.find((w) => w.sandboxProfile === 'dev-flex');
    expect(worker).toBeDefined();
    const table = await capstan(['workers', 'list']);
    expect(table.stdout.split('\n')[0]).toMatch(/^NAME\s+PROFILE\s+STATUS/);
    const drain = await capstan(['workers', 'drain', worker?.workerId ?? '']);
    expect(drain.code, drain.stderr).toBe(0);
    expect(drain.stdout).toContain('drain requested');
    await until('the worker to drain', async () => {
      const now = JSON.parse((await capstan(['workers', 'list', '--json'])).stdout) as {
        workers: Array<{ workerId: string; status: string; drainRequested: boolean }>;
      };
      const mine = now.workers.find((w) => w.workerId === worker?.workerId);
      return mine === undefined || mine.status === 'draining' || mine.status === 'deregistered' ? true : undefined;
    });
  });
});

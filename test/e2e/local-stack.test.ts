import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePortBlock } from '../support/local-dynamodb.js';
import { callApi, until as pollUntil } from '../support/stack-api.js';

const ROOT = join(import.meta.dirname, '../..');
let home: string;
let port: number;
let stack: ChildProcess;
let output = '';

/** Waits for `predicate` to hold, polling, until the deadline. */
async function until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output so far:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function processesOnPort(dynamoPort: number): string[] {
  try {
    return execFileSync('pgrep', ['-af', `DynamoDBLocal.jar.*-port ${dynamoPort}`], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
}

/** Every process below `pid`, with its command line. */
function descendants(pid: number): Array<{ pid: number; args: string }> {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' })
    .split('\n')
    .flatMap((line) => {
      const match = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
      return match ? [{ pid: Number(match[1]), ppid: Number(match[2]), args: match[3] ?? '' }] : [];
    });
  const found: Array<{ pid: number; args: string }> = [];
  const walk = (parent: number) => {
    for (const row of rows.filter((r) => r.ppid === parent)) {
      found.push({ pid: row.pid, args: row.args });
      walk(row.pid);
    }
  };
  walk(pid);
  return found;
}

const workersOf = (pid: number) => descendants(pid).filter((p) => p.args.includes('worker-container/main.ts'));

async function startStack(fresh: boolean): Promise<void> {
  output = '';
  // As `npm start` runs it in a terminal: one Node process with tsx as a loader, leading its own
  // process group, so Ctrl-C (SIGINT to the whole group) can be sent the way a terminal sends it.
  stack = spawn(process.execPath, ['--import', 'tsx', 'local/main.ts', ...(fresh ? ['--fresh'] : [])], {
    cwd: ROOT,
    detached: true,
    env: {
      ...process.env,
      CAPSTAN_PORT: String(port),
      CAPSTAN_HOME: home,
      CAPSTAN_WORKERS: 'dev-flex=2,staging-standard=0,prod-standard=0,prod-critical=0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stack.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  stack.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await until(() => output.includes('ready in'), 60_000, 'the local stack to be ready');
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-home-'));
  port = await freePortBlock();
  await startStack(true);
});

/** Ctrl-C in the terminal: SIGINT to every process of the foreground process group. */
const ctrlC = () => process.kill(-(stack.pid ?? 0), 'SIGINT');

afterAll(() => {
  if (stack.exitCode === null) process.kill(-(stack.pid ?? 0), 'SIGKILL');
  rmSync(home, { recursive: true, force: true });
});

describe('npm start', () => {
  it('answers the health check with the status of each component', async () => {
    const response = await fetch(`http://127.0.0.1:${port}/v1/health`);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { status: string; components: Record<string, { status: string }> };
    expect(body.status).toBe('ok');
    expect(Object.keys(body.components).sort()).toEqual([
      'connections',
      'eventLog',
      'evidenceBucket',
      'queue:dev-flex',
      'queue:prod-critical',
      'queue:prod-standard',
      'queue:staging-standard',
      'stateMachine',
      'stateTable',
    ]);
    for (const component of Object.values(body.components)) expect(component.status).toBe('ok');
  });

  it('writes local.json with working development tokens', async () => {
    const local = JSON.parse(readFileSync(join(home, 'local.json'), 'utf8')) as {
      restUrl: string;
      wsUrl: string;
      tokens: Record<string, string>;
    };
    expect(Object.keys(local.tokens).sort()).toEqual(['admin', 'approver', 'approver2', 'operator', 'otherTenant']);
    expect(local.restUrl).toBe(`http://127.0.0.1:${port}/v1`);
    const register = await fetch(`${local.restUrl}/runbooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${local.tokens.operator}`, 'content-type': 'application/yaml' },
      body: readFileSync(join(ROOT, 'examples/runbooks/hello.yaml'), 'utf8'),
    });
    expect(register.status).toBe(201);
    const otherTenant = await fetch(`${local.restUrl}/runbooks/hello`, {
      headers: { authorization: `Bearer ${local.tokens.otherTenant}` },
    });
    expect(otherTenant.status).toBe(404);
    const anonymous = await fetch(`${local.restUrl}/runbooks`);
    expect(anonymous.status).toBe(401);
  });

  it('restarts a worker that dies, the way an ECS service would, and says so', async () => {
    await until(() => workersOf(stack.pid!).length === 2, 20_000, 'two workers');
    const [worker] = workersOf(stack.pid!);
    process.kill(worker!.pid, 'SIGKILL');
    await until(() => /worker dev-flex#\d exited \(SIGKILL\); restarting/.test(output), 10_000, 'the restart log line');
    await until(() => workersOf(stack.pid!).some((w) => w.pid !== worker!.pid), 20_000, 'a new worker process');
  });

  it('drains on Ctrl-C, and every run in flight finishes after the next start', async () => {
    const local = JSON.parse(readFileSync(join(home, 'local.json'), 'utf8')) as {
      restUrl: string;
      tokens: Record<string, string>;
    };
    const token = local.tokens.operator ?? '';
    await callApi(local.restUrl, token, 'POST', '/runbooks', {
      name: 'slow',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        { id: 'nap', backend: 'test', action: 'sleep', params: { ms: 2000 } },
        { id: 'after', backend: 'test', action: 'echo', params: { message: 'done' } },
      ],
    });
    const runIds: string[] = [];
    for (let i = 0; i < 5; i++)
      runIds.push(String((await callApi(local.restUrl, token, 'POST', '/runs', { runbookId: 'slow' })).body.runId));
    const events = async (runId: string) =>
      (await callApi(local.restUrl, token, 'GET', `/runs/${runId}/events`)).body.events as Array<{
        type: string;
        payload: { error?: { code?: string } };
      }>;
    // Both workers busy with a step: Ctrl-C comes in the middle of their work.
    await pollUntil(
      'two steps started',
      async () => {
        let started = 0;
        for (const runId of runIds) started += (await events(runId)).filter((e) => e.type === 'step.started').length;
        return started >= 2 ? true : undefined;
      },
      20_000,
      () => output,
    );

    const pid = stack.pid!;
    expect(processesOnPort(port + 1)).toHaveLength(1);
    ctrlC();
    await until(() => stack.exitCode !== null, 30_000, 'the local stack to exit');
    expect(stack.exitCode, output).toBe(0);
    expect(output).not.toMatch(/stopping at once/);
    await until(() => processesOnPort(port + 1).length === 0, 10_000, 'DynamoDB Local to exit');
    expect(descendants(pid)).toEqual([]);
    expect(
      execFileSync('ps', ['-eo', 'args='], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.includes('worker-container/main.ts') && line.includes(home)),
    ).toEqual([]);

    await startStack(false);
    for (const runId of runIds) {
      const status = await pollUntil(
        `run ${runId} to end`,
        async () => {
          const run = (await callApi(local.restUrl, token, 'GET', `/runs/${runId}`)).body;
          return ['succeeded', 'failed', 'cancelled'].includes(String(run.status)) ? String(run.status) : undefined;
        },
        60_000,
        () => output,
      );
      const failures = (await events(runId)).filter((e) => e.type === 'step.failed');
      expect({ runId, status, failures }).toEqual({ runId, status: 'succeeded', failures: [] });
    }
    ctrlC();
    await until(() => stack.exitCode !== null, 30_000, 'the local stack to exit');
  });
});

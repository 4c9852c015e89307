import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePortBlock } from '../support/local-dynamodb.js';

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
  // As `npm start` runs it: one Node process with tsx as a loader, so signals reach the stack itself.
  stack = spawn(process.execPath, ['--import', 'tsx', 'local/main.ts', ...(fresh ? ['--fresh'] : [])], {
    cwd: ROOT,
    env: {
      ...process.env,
      CAPSTAN_PORT: String(port),
      CAPSTAN_HOME: home,
      CAPSTAN_WORKERS: 'dev-flex=1,staging-standard=0,prod-standard=0,prod-critical=0',
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

afterAll(() => {
  if (stack.exitCode === null) stack.kill('SIGKILL');
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
    await until(() => workersOf(stack.pid!).length === 1, 20_000, 'one worker');
    const [worker] = workersOf(stack.pid!);
    process.kill(worker!.pid, 'SIGKILL');
    await until(() => /worker dev-flex#1 exited \(SIGKILL\); restarting/.test(output), 10_000, 'the restart log line');
    await until(() => workersOf(stack.pid!).some((w) => w.pid !== worker!.pid), 20_000, 'a new worker process');
  });

  it('stops everything on SIGINT, and a run in flight finishes after the next start', async () => {
    const local = JSON.parse(readFileSync(join(home, 'local.json'), 'utf8')) as {
      restUrl: string;
      tokens: Record<string, string>;
    };
    const headers = { authorization: `Bearer ${local.tokens.operator}`, 'content-type': 'application/json' };
    await fetch(`${local.restUrl}/runbooks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        name: 'slow',
        environment: 'dev',
        sandbox_profile: 'dev-flex',
        steps: [
          { id: 'nap', backend: 'test', action: 'sleep', params: { ms: 1500 } },
          { id: 'after', backend: 'test', action: 'echo', params: { message: 'done' } },
        ],
      }),
    });
    const created = (await (
      await fetch(`${local.restUrl}/runs`, { method: 'POST', headers, body: '{"runbookId":"slow"}' })
    ).json()) as { runId: string };
    const events = async () =>
      (
        (await (await fetch(`${local.restUrl}/runs/${created.runId}/events`, { headers })).json()) as {
          events: Array<{ type: string }>;
        }
      ).events;
    const deadline = Date.now() + 20_000;
    while (!(await events()).some((e) => e.type === 'step.started') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));

    const pid = stack.pid!;
    expect(processesOnPort(port + 1)).toHaveLength(1);
    stack.kill('SIGINT');
    await until(() => stack.exitCode !== null, 30_000, 'the local stack to exit');
    expect(stack.exitCode, output).toBe(0);
    await until(() => processesOnPort(port + 1).length === 0, 10_000, 'DynamoDB Local to exit');
    expect(descendants(pid)).toEqual([]);
    expect(
      execFileSync('ps', ['-eo', 'args='], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.includes('worker-container/main.ts') && line.includes(home)),
    ).toEqual([]);

    await startStack(false);
    const finished = Date.now() + 30_000;
    let status = '';
    while (Date.now() < finished) {
      const run = (await (await fetch(`${local.restUrl}/runs/${created.runId}`, { headers })).json()) as {
        status: string;
      };
      status = run.status;
      if (status === 'succeeded' || status === 'failed') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe('succeeded');
    stack.kill('SIGINT');
    await until(() => stack.exitCode !== null, 30_000, 'the local stack to exit');
  });
});

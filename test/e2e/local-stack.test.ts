import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/local-dynamodb.js';

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

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-home-'));
  port = await freePort();
  stack = spawn(join(ROOT, 'node_modules/.bin/tsx'), ['local/main.ts', '--fresh'], {
    cwd: ROOT,
    env: { ...process.env, CAPSTAN_PORT: String(port), CAPSTAN_HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stack.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  stack.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await until(() => output.includes('ready in'), 60_000, 'the local stack to be ready');
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

  it('stops DynamoDB Local with it on SIGINT, leaving no process behind', async () => {
    expect(processesOnPort(port + 1)).toHaveLength(1);
    stack.kill('SIGINT');
    await until(() => stack.exitCode !== null, 20_000, 'the local stack to exit');
    expect(stack.exitCode).toBe(0);
    await until(() => processesOnPort(port + 1).length === 0, 10_000, 'DynamoDB Local to exit');
  });
});

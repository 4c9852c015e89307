import { spawn } from 'node:child_process';
import { constants, accessSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scriptRunParams } from '../../shared/domain/catalogue.js';
import { ActionError, type Backend, typed } from './types.js';

export interface ScriptBackendOptions {
  /** The allow-listed catalogue: only executable files directly in this directory can run. */
  readonly directory: string;
  /** Bytes of stdout + stderr forwarded per run; the rest is dropped with a marker. */
  readonly outputCapBytes?: number;
}

/** The environment variable a secret is passed in: `SECRET_` and its id in upper snake case. */
export function secretVariable(secretId: string): string {
  return `SECRET_${secretId
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_|_$/g, '')
    .toUpperCase()}`;
}

/** The catalogue script's path, or an error when the name is not an executable file in the catalogue. */
export function resolveScript(directory: string, name: string): string {
  const path = join(directory, name);
  try {
    if (!statSync(path).isFile()) throw new Error('not a file');
    accessSync(path, constants.X_OK);
  } catch {
    throw new ActionError('UNKNOWN_SCRIPT', `'${name}' is not an executable script in the catalogue`, false);
  }
  return path;
}

/**
 * `script.run`: a catalogue script with its arguments as an argv array. No shell is involved, so
 * an argument is one literal argv element whatever it contains. The process gets a clean
 * environment (PATH, HOME, LANG, and the step's secrets), a temporary working directory removed
 * afterwards, and its own process group, killed whole on timeout or cancellation.
 */
export function makeScriptBackend(options: ScriptBackendOptions): Backend {
  const cap = options.outputCapBytes ?? 1024 * 1024;
  return {
    name: 'script',
    actions: {
      async run({ params, secrets, signal, output }) {
        const { script, args } = typed(scriptRunParams, params);
        const path = resolveScript(options.directory, script);
        const workdir = mkdtempSync(join(tmpdir(), 'capstan-script-'));
        try {
          const child = spawn(path, args, {
            cwd: workdir,
            shell: false,
            detached: true,
            stdio: ['ignore', 'pipe', 'pipe'],
            env: {
              PATH: '/usr/local/bin:/usr/bin:/bin',
              HOME: workdir,
              TMPDIR: workdir,
              LANG: 'C.UTF-8',
              ...Object.fromEntries(Object.entries(secrets).map(([id, value]) => [secretVariable(id), value])),
            },
          });
          const killGroup = () => {
            if (child.pid !== undefined && child.exitCode === null)
              try {
                process.kill(-child.pid, 'SIGKILL');
              } catch {
                // Already gone.
              }
          };
          signal.addEventListener('abort', killGroup, { once: true });
          let forwarded = 0;
          let truncated = false;
          // Whole lines go to the output (a secret is never split across two of them).
          const partial = { stdout: '', stderr: '' };
          const emit = (stream: 'stdout' | 'stderr', line: string) => {
            if (truncated) return;
            const size = Buffer.byteLength(line) + 1;
            if (forwarded + size > cap) {
              truncated = true;
              output('stderr', `[script output truncated after ${cap} bytes]`);
              return;
            }
            forwarded += size;
            output(stream, line);
          };
          const forward = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
            const lines = (partial[stream] + chunk.toString('utf8')).split('\n');
            partial[stream] = lines.pop() ?? '';
            for (const line of lines) emit(stream, line);
          };
          child.stdout.on('data', forward('stdout'));
          child.stderr.on('data', forward('stderr'));
          const [code, killedBy] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
            child.once('error', reject);
            child.once('close', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
          });
          for (const stream of ['stdout', 'stderr'] as const) if (partial[stream]) emit(stream, partial[stream]);
          signal.removeEventListener('abort', killGroup);
          if (signal.aborted) throw signal.reason;
          if (code !== 0)
            throw new ActionError(
              'SCRIPT_FAILED',
              `${script} ${killedBy ? `was killed by ${killedBy}` : `exited with code ${code}`}`,
              false,
            );
          return { output: { script, exitCode: 0, outputBytes: forwarded, truncated } };
        } finally {
          rmSync(workdir, { recursive: true, force: true });
        }
      },
    },
  };
}

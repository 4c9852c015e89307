import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/**
 * Runs one exported bench part in a child process of its own and returns what it resolved to.
 *
 * Handlers keep their clients and configuration for the life of the process, as a warm Lambda
 * does, so a process can host one local stack; a scenario that needs several fresh stacks runs
 * each part here. The part's last argument is its progress callback.
 */
export async function isolated<R>(
  moduleUrl: string,
  exportName: string,
  args: readonly unknown[],
  progress: (line: string) => void,
): Promise<R> {
  const child = fork(fileURLToPath(new URL('./child.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, CAPSTAN_BENCH_PART: JSON.stringify({ moduleUrl, exportName, args }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise<R>((resolve, reject) => {
    let outcome: { value: R } | { error: Error } | undefined;
    child.on('message', (raw) => {
      const message = partMessage.safeParse(raw);
      if (!message.success) return;
      const { data } = message;
      if (data.kind === 'progress') progress(data.line);
      else if (data.kind === 'result') outcome = { value: data.value as R };
      else outcome = { error: new Error(data.message) };
    });
    // Settled once the child has exited, so its clean-up (and a profile it writes) is done.
    child.on('exit', (code, signal) => {
      if (!outcome) reject(new Error(`${exportName} exited with ${signal ?? code} before reporting`));
      else if ('error' in outcome) reject(outcome.error);
      else resolve(outcome.value);
    });
  });
}

export const partMessage = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('progress'), line: z.string() }),
  z.object({ kind: z.literal('result'), value: z.unknown() }),
  z.object({ kind: z.literal('error'), message: z.string() }),
]);
export type PartMessage = z.infer<typeof partMessage>;

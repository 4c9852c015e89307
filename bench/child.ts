import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { PartMessage } from './isolated.js';
import { cleanUp } from './support.js';

/** The child side of `isolated`: imports the part, runs it, reports progress and the result over IPC. */
const part = z
  .object({ moduleUrl: z.string(), exportName: z.string(), args: z.array(z.unknown()) })
  .parse(JSON.parse(process.env.CAPSTAN_BENCH_PART ?? 'null'));

const send = (message: PartMessage) =>
  new Promise<void>((resolve) => {
    process.send?.(message, () => resolve());
  });

/** `CAPSTAN_BENCH_PROFILE=<dir>` writes a CPU profile of this process, the one the stack runs in. */
const profileDir = process.env.CAPSTAN_BENCH_PROFILE;
const profiler = profileDir ? new Session() : undefined;
if (profiler) {
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.start');
}

let exitCode = 0;
try {
  const loaded = (await import(part.moduleUrl)) as Record<string, unknown>;
  const run = loaded[part.exportName];
  if (typeof run !== 'function') throw new Error(`${part.moduleUrl} has no function ${part.exportName}`);
  const progress = (line: string) => void send({ kind: 'progress', line });
  const value: unknown = await (run as (...args: unknown[]) => Promise<unknown>)(...part.args, progress);
  await send({ kind: 'result', value });
} catch (error) {
  exitCode = 1;
  await send({ kind: 'error', message: (error as Error).stack ?? String(error) });
} finally {
  cleanUp();
  if (profiler && profileDir) {
    const { profile } = await profiler.post('Profiler.stop');
    mkdirSync(profileDir, { recursive: true });
    const file = join(profileDir, `${part.exportName}-${Date.now()}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    console.error(`CPU profile: ${file}`);
  }
}
process.exit(exitCode);

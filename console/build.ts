import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { buildSync } from 'esbuild';

const HERE = import.meta.dirname;
/** The built console: static files only (`config.json` is written beside them where it is served). */
export const CONSOLE_DIST = join(HERE, 'dist');
const SOURCES = [join(HERE, 'src'), join(HERE, 'public'), join(HERE, 'build.ts')];

const newest = (path: string): number => {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newest(join(path, name))));
};

/** Bundles `console/src` with esbuild into `console/dist` (minified, with a source map). */
export function buildConsole(outDir = CONSOLE_DIST): void {
  // Built beside the target and moved into place, so a server never reads a half-written bundle.
  const staging = `${outDir}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  buildSync({
    entryPoints: [join(HERE, 'src', 'main.tsx')],
    outfile: join(staging, 'app.js'),
    bundle: true,
    format: 'esm',
    target: ['es2022'],
    platform: 'browser',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    logLevel: 'error',
  });
  for (const name of readdirSync(join(HERE, 'public'))) copyFileSync(join(HERE, 'public', name), join(staging, name));
  rmSync(outDir, { recursive: true, force: true });
  renameSync(staging, outDir);
}

/** Builds the console when `dist` is missing or older than a source; answers its directory. */
export function ensureConsoleBuilt(outDir = CONSOLE_DIST): string {
  const built = join(outDir, 'index.html');
  if (!existsSync(built) || statSync(built).mtimeMs < Math.max(...SOURCES.map(newest))) buildConsole(outDir);
  return outDir;
}

if (process.argv[1] === import.meta.filename) {
  buildConsole();
  console.log(`console built in ${CONSOLE_DIST}`);
}

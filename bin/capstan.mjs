#!/usr/bin/env node
// `npx capstan`: runs the CLI's TypeScript (cli/) through tsx on the pinned Node.js 24. Started
// by another Node.js (a global install, a shell without node_modules/.bin on PATH), it hands
// over to the pinned one that `npm ci` installed, so every command sees the same runtime.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = join(dirname(self), '..');
if (Number(process.versions.node.split('.')[0]) !== 24) {
  const pinned = join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'node.cmd' : 'node');
  if (!existsSync(pinned)) {
    console.error(`capstan: needs Node.js 24 (found ${process.version}); run \`npm ci\` in ${root} to install it`);
    process.exit(2);
  }
  const child = spawnSync(pinned, [self, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(child.status ?? 3);
}
const { register } = await import('tsx/esm/api');
register();
await import(pathToFileURL(join(root, 'cli', 'bin.ts')).href);

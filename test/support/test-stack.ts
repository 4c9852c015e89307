import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '../../local/stack.js';
import { freePortBlock } from './local-dynamodb.js';

/** A fresh local stack in a temporary directory of its own (`capstan-<name>-...`), on a free block of ports. */
export async function startTestStack(
  name: string,
  options: Omit<LocalStackOptions, 'port' | 'stateDir' | 'fresh'>,
): Promise<{ stack: LocalStack; home: string }> {
  const home = mkdtempSync(join(tmpdir(), `capstan-${name}-`));
  const stack = await startLocalStack({ ...options, port: await freePortBlock(), stateDir: home, fresh: true });
  return { stack, home };
}

/** Stops a test stack, if it started, and removes its directory. */
export async function stopTestStack(stack: LocalStack | undefined, home: string | undefined): Promise<void> {
  await stack?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
}

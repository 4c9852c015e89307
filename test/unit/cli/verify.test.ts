import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../../cli/main.js';
import { chainEvents, EMPTY_CHAIN } from '../../../shared/domain/events.js';
import { linesOf, pack, replace, reseal, testKey } from '../../support/evidence-bundles.js';

const dir = mkdtempSync(join(tmpdir(), 'capstan-verify-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RUN_ID = 'run-00000000-0000-4000-8000-000000000002';
const { events, head } = chainEvents(EMPTY_CHAIN, { runId: RUN_ID, tenantId: 't' }, [
  { eventId: 'e1', type: 'run.created', timestamp: '2026-01-01T00:00:00.000Z', payload: {}, meta: {} },
  { eventId: 'e2', type: 'run.cancelled', timestamp: '2026-01-01T00:00:01.000Z', payload: {}, meta: {} },
]);
const key = testKey();
const manifest = {
  format: 'capstan-evidence/1',
  runId: RUN_ID,
  tenantId: 't',
  runbook: { id: 'r', version: 1, digest: 'd' },
  chainHead: head,
  createdAt: '2026-01-01T00:00:02.000Z',
  keyId: 'test',
  files: [
    { path: 'events.jsonl', sha256: '' },
    { path: 'public-key.pem', sha256: '' },
  ],
};
const sealed = reseal(
  [
    { path: 'manifest.json', body: Buffer.from(JSON.stringify(manifest)) },
    { path: 'signatures/manifest.dsse.json', body: Buffer.from('{}') },
    { path: 'events.jsonl', body: Buffer.from(linesOf(events)) },
    { path: 'public-key.pem', body: Buffer.from(key.pem) },
  ],
  key,
);

async function verify(entries: Parameters<typeof pack>[0], ...extra: string[]) {
  const file = join(dir, `${Math.random()}.tar.gz`);
  writeFileSync(file, pack(entries));
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(['verify', file, ...extra], {
    env: {},
    cwd: dir,
    isTTY: false,
    write: (t) => out.push(t),
    writeError: (t) => err.push(t),
  });
  return { code, out: out.join(''), err: err.join('') };
}

describe('capstan verify', () => {
  it('exits 0 offline for an untouched bundle and says what it checked', async () => {
    const result = await verify(sealed);
    expect(result.code).toBe(0);
    expect(result.out).toContain('verified');
    expect(result.out).toContain('1 chain(s) of 2 events');
  });

  it('exits 1 naming the file whose digest no longer matches', async () => {
    const result = await verify(replace(sealed, 'events.jsonl', linesOf(events.slice(0, 1))));
    expect(result.code).toBe(1);
    expect(result.err).toContain('digest: events.jsonl does not match its sha256');
  });

  it('exits 1 when the bundle was signed by another key than the pinned one', async () => {
    const pinned = join(dir, 'pinned.pem');
    writeFileSync(pinned, testKey().pem);
    const result = await verify(sealed, '--key', pinned);
    expect(result.code).toBe(1);
    expect(result.err).toContain('signature: the manifest signature does not verify with the pinned key');
  });

  it('exits 2 for a bundle file that does not exist', async () => {
    const out: string[] = [];
    const code = await runCli(['verify', join(dir, 'missing.tar.gz')], {
      env: {},
      cwd: dir,
      isTTY: false,
      write: (t) => out.push(t),
      writeError: (t) => out.push(t),
    });
    expect(code).toBe(2);
  });
});

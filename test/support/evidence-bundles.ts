import { createHash, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { envelopeOf, MANIFEST_PAYLOAD_TYPE, preAuthEncoding } from '../../shared/domain/evidence/dsse.js';
import { MANIFEST_PATH, PUBLIC_KEY_PATH, sha256Of, SIGNATURE_PATH } from '../../shared/domain/evidence/manifest.js';
import { readTar, type TarEntry, writeTar } from '../../shared/domain/evidence/tar.js';
import { eventHash, GENESIS_HASH, type RunEvent } from '../../shared/domain/events.js';

/** A P-256 key pair for signing bundles in tests, the public half as PEM. */
export function testKey(): { privateKey: KeyObject; pem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return { privateKey, pem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

export const unpack = (gz: Uint8Array): TarEntry[] =>
  readTar(gunzipSync(gz)).map((e) => ({ ...e, body: Buffer.from(e.body) }));
export const pack = (entries: readonly TarEntry[]): Buffer => gzipSync(writeTar(entries));
export const textOf = (entries: readonly TarEntry[], path: string) =>
  Buffer.from(entries.find((e) => e.path === path)?.body ?? []).toString('utf8');
export const replace = (entries: readonly TarEntry[], path: string, text: string): TarEntry[] =>
  entries.map((e) => (e.path === path ? { path, body: Buffer.from(text, 'utf8') } : e));

/** Re-chains events from the first: each seq, prevHash and hash recomputed, as a forger would. */
export function rechain(events: readonly RunEvent[]): RunEvent[] {
  let prev = GENESIS_HASH;
  return events.map((event, i) => {
    const unhashed = { ...event, seq: i + 1, prevHash: prev };
    delete (unhashed as Partial<RunEvent>).hash;
    const hash = eventHash(unhashed);
    prev = hash;
    return { ...unhashed, hash };
  });
}

export const eventsOf = (text: string): RunEvent[] =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEvent);
export const linesOf = (events: readonly RunEvent[]) => events.map((e) => `${JSON.stringify(e)}\n`).join('');

/**
 * Re-seals a bundle the way someone holding another key would: every listed digest recomputed
 * (and the manifest edited by `edit`), the manifest signed with `key`, and with `swapKey` the
 * bundle's public-key.pem replaced by that key's.
 */
export function reseal(
  entries: readonly TarEntry[],
  key: { privateKey: KeyObject; pem: string },
  options: { swapKey?: boolean; edit?: (manifest: Record<string, unknown>) => void } = {},
): TarEntry[] {
  let files = options.swapKey ? replace(entries, PUBLIC_KEY_PATH, key.pem) : [...entries];
  const manifest = JSON.parse(textOf(files, MANIFEST_PATH)) as {
    files: Array<{ path: string; sha256: string }>;
  } & Record<string, unknown>;
  for (const file of manifest.files) {
    const body = files.find((e) => e.path === file.path)?.body;
    if (body) file.sha256 = sha256Of(body);
  }
  options.edit?.(manifest);
  const bytes = Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8');
  const pae = preAuthEncoding(MANIFEST_PAYLOAD_TYPE, bytes);
  const signature = sign('sha256', pae, { key: key.privateKey, dsaEncoding: 'der' });
  const envelope = envelopeOf(MANIFEST_PAYLOAD_TYPE, bytes, 'forged', signature);
  files = replace(files, MANIFEST_PATH, bytes.toString('utf8'));
  return replace(files, SIGNATURE_PATH, `${JSON.stringify(envelope, null, 2)}\n`);
}

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

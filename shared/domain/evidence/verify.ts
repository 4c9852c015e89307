import { type RunEvent, runEventSchema, verifyChain } from '../events.js';
import { dsseEnvelopeSchema, MANIFEST_PAYLOAD_TYPE, verifyEnvelope } from './dsse.js';
import { type Manifest, MANIFEST_PATH, manifestSchema, PUBLIC_KEY_PATH, sha256Of, SIGNATURE_PATH } from './manifest.js';
import type { TarEntry } from './tar.js';

/** Which check failed first; the CLI names it and exits 1. */
export type VerificationCheck = 'format' | 'signature' | 'digest' | 'chain' | 'chain-head';

export type Verdict =
  | {
      readonly ok: true;
      readonly manifest: Manifest;
      readonly files: number;
      readonly runs: ReadonlyArray<{ runId: string; events: number; head: string }>;
      readonly keySource: 'pinned' | 'bundle';
    }
  | { readonly ok: false; readonly check: VerificationCheck; readonly reason: string };

const fail = (check: VerificationCheck, reason: string): Verdict => ({ ok: false, check, reason });

/** A run's events from a JSON-lines file; a line that is not an event names its number. */
export function parseEventLines(text: string): { events: RunEvent[] } | { line: number; reason: string } {
  const events: RunEvent[] = [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const [index, line] of lines.entries()) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return { line: index + 1, reason: 'is not JSON' };
    }
    const parsed = runEventSchema.safeParse(value);
    if (!parsed.success)
      return { line: index + 1, reason: `is not an event (${parsed.error.issues[0]?.message ?? ''})` };
    events.push(parsed.data);
  }
  return { events };
}

/**
 * Verifies a bundle offline, in the order that names the most precise failure: the manifest is
 * signed (with the pinned key, else the bundle's own), every file has the digest the manifest
 * lists and nothing unlisted is present, every run's chain holds (gap-free seq, each link, each
 * recomputed hash) and ends on the head the manifest records. Stops at the first failure.
 */
export function verifyBundle(entries: readonly TarEntry[], options: { pinnedKeyPem?: string } = {}): Verdict {
  const files = new Map<string, Uint8Array>();
  for (const entry of entries) {
    if (files.has(entry.path)) return fail('format', `${entry.path} appears twice in the bundle`);
    files.set(entry.path, entry.body);
  }
  const text = (path: string) => {
    const body = files.get(path);
    return body === undefined ? undefined : Buffer.from(body).toString('utf8');
  };

  const manifestBody = files.get(MANIFEST_PATH);
  if (!manifestBody) return fail('format', `the bundle has no ${MANIFEST_PATH}`);
  const signatureText = text(SIGNATURE_PATH);
  if (signatureText === undefined) return fail('format', `the bundle has no ${SIGNATURE_PATH}`);
  let envelopeValue: unknown;
  try {
    envelopeValue = JSON.parse(signatureText);
  } catch {
    return fail('signature', `${SIGNATURE_PATH} is not JSON`);
  }
  const envelope = dsseEnvelopeSchema.safeParse(envelopeValue);
  if (!envelope.success) return fail('signature', `${SIGNATURE_PATH} is not a DSSE envelope`);
  if (envelope.data.payloadType !== MANIFEST_PAYLOAD_TYPE)
    return fail(
      'signature',
      `the envelope's payload type is ${envelope.data.payloadType}, not ${MANIFEST_PAYLOAD_TYPE}`,
    );
  if (!Buffer.from(envelope.data.payload, 'base64').equals(Buffer.from(manifestBody)))
    return fail('signature', `the signed payload is not the bundle's ${MANIFEST_PATH}`);
  const keyPem = options.pinnedKeyPem ?? text(PUBLIC_KEY_PATH);
  if (keyPem === undefined) return fail('format', `the bundle has no ${PUBLIC_KEY_PATH} and no key was given`);
  const keyName = options.pinnedKeyPem === undefined ? `the bundle's ${PUBLIC_KEY_PATH}` : 'the pinned key';
  if (!verifyEnvelope(envelope.data, keyPem))
    return fail('signature', `the manifest signature does not verify with ${keyName}`);

  let manifest: Manifest;
  try {
    const parsed = manifestSchema.safeParse(JSON.parse(Buffer.from(manifestBody).toString('utf8')));
    if (!parsed.success) return fail('format', `${MANIFEST_PATH} is not a Capstan manifest`);
    manifest = parsed.data;
  } catch {
    return fail('format', `${MANIFEST_PATH} is not JSON`);
  }

  const listed = new Set<string>();
  for (const file of manifest.files) {
    listed.add(file.path);
    const body = files.get(file.path);
    if (!body) return fail('digest', `${file.path} is listed in the manifest but missing from the bundle`);
    if (sha256Of(body) !== file.sha256) return fail('digest', `${file.path} does not match its sha256 in the manifest`);
  }
  for (const path of files.keys())
    if (path !== MANIFEST_PATH && path !== SIGNATURE_PATH && !listed.has(path))
      return fail('digest', `${path} is in the bundle but not in the manifest`);

  const runs =
    manifest.format === 'capstan-evidence/1'
      ? [{ runId: manifest.runId, chainHead: manifest.chainHead, directory: '' }]
      : manifest.runs.map((r) => ({ ...r, directory: r.directory.endsWith('/') ? r.directory : `${r.directory}/` }));
  const checked: Array<{ runId: string; events: number; head: string }> = [];
  for (const run of runs) {
    const path = `${run.directory}events.jsonl`;
    const eventsText = text(path);
    if (eventsText === undefined) return fail('format', `run ${run.runId} has no ${path}`);
    const parsed = parseEventLines(eventsText);
    if ('line' in parsed) return fail('chain', `${path} line ${parsed.line} ${parsed.reason}`);
    const foreign = parsed.events.find((e) => e.runId !== run.runId);
    if (foreign) return fail('chain', `${path} seq ${foreign.seq} belongs to run ${foreign.runId}, not ${run.runId}`);
    const verdict = verifyChain(parsed.events);
    if (!verdict.valid)
      return fail(
        'chain',
        `the chain of run ${run.runId} breaks at line ${verdict.index + 1} (seq ${verdict.seq}): ${verdict.reason}`,
      );
    if (verdict.head.seq !== run.chainHead.seq || verdict.head.hash !== run.chainHead.hash)
      return fail(
        'chain-head',
        `the chain of run ${run.runId} ends at seq ${verdict.head.seq} ${verdict.head.hash}, but the manifest records seq ${run.chainHead.seq} ${run.chainHead.hash}`,
      );
    checked.push({ runId: run.runId, events: verdict.count, head: verdict.head.hash });
  }
  return {
    ok: true,
    manifest,
    files: manifest.files.length,
    runs: checked,
    keySource: options.pinnedKeyPem === undefined ? 'bundle' : 'pinned',
  };
}

import { gzipSync } from 'node:zlib';
import { type Principal, type Run } from '../domain/entities.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import { GENESIS_HASH, type RunEvent } from '../domain/events.js';
import { artifactsOf, type RunEvidence, runBundleFiles } from '../domain/evidence/bundle.js';
import { envelopeOf, MANIFEST_PAYLOAD_TYPE, paeDigest } from '../domain/evidence/dsse.js';
import {
  bundleFile,
  type Manifest,
  MANIFEST_PATH,
  manifestBytes,
  PUBLIC_KEY_PATH,
  RUN_BUNDLE_FORMAT,
  sha256Of,
  SIGNATURE_PATH,
} from '../domain/evidence/manifest.js';
import { type TarEntry, writeTar } from '../domain/evidence/tar.js';
import { runStateMachine } from '../domain/statuses.js';
import { requireRole } from './authorize.js';
import type { EvidenceDeps, EvidenceRunReader, ManifestSigner } from './evidence-ports.js';

const EVENT_PAGE = 1000;
const ANY_ROLE = ['viewer', 'operator', 'approver', 'admin'] as const;

/** A run the principal may see: another tenant's run does not exist for them. */
export async function visibleRecord(runs: EvidenceRunReader, principal: Principal, runId: string) {
  const record = await runs.load(runId);
  if (!record || record.run.tenantId !== principal.tenantId) throw new NotFoundError(`run '${runId}' not found`);
  return record;
}

/** Every event of a run, in seq order, page by page. */
export async function allEvents(runs: EvidenceRunReader, runId: string): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for (;;) {
    const page = await runs.events(runId, events.at(-1)?.seq ?? 0, EVENT_PAGE);
    events.push(...page);
    if (page.length < EVENT_PAGE) return events;
  }
}

/** Reads everything a run's bundle holds. */
export async function gatherEvidence(deps: EvidenceDeps, run: Run): Promise<RunEvidence> {
  const [events, executions, approvals, runbook] = await Promise.all([
    allEvents(deps.runs, run.runId),
    deps.runs.executions(run.runId),
    deps.approvals.list(run.runId),
    deps.runbooks.get(run.tenantId, run.runbookId, run.runbookVersion),
  ]);
  if (!runbook) throw new NotFoundError(`runbook '${run.runbookId}' version ${run.runbookVersion} not found`);
  const keys = [...new Set(executions.filter((e) => e.startedAt !== undefined).map((e) => e.idempotencyKey))];
  const receipts = (await Promise.all(keys.map((key) => deps.runs.receipt(key)))).filter((r) => r !== undefined);
  return {
    run,
    runbook,
    events,
    approvals,
    executions,
    receipts,
    artifacts: artifactsOf(events),
    policy: deps.policy,
  };
}

/** The manifest's signature and the key that checks it, as bundle files. */
export async function signManifest(signer: ManifestSigner, manifest: Uint8Array, keyId: string) {
  const signature = await signer.signDigest(paeDigest(MANIFEST_PAYLOAD_TYPE, manifest));
  const envelope = envelopeOf(MANIFEST_PAYLOAD_TYPE, manifest, keyId, signature);
  return [
    { path: MANIFEST_PATH, body: manifest },
    { path: SIGNATURE_PATH, body: Buffer.from(`${JSON.stringify(envelope, null, 2)}\n`, 'utf8') },
  ];
}

/** Where a run's bundle lives in the evidence bucket: one key per content, so a bundle is never overwritten. */
const bundleKey = (run: Pick<Run, 'tenantId' | 'runId'>, sha256: string) =>
  `evidence/${run.tenantId}/${run.runId}/${sha256}.tar.gz`;

/** Builds the gzipped tar of a finished run's bundle (brief: "Evidence"). */
export async function buildRunBundle(deps: EvidenceDeps, run: Run) {
  const evidence = await gatherEvidence(deps, run);
  // The chain as read: a later event (a replay of this run) is in the next bundle, not a mismatch in this one.
  const last = evidence.events.at(-1);
  const head = { seq: last?.seq ?? 0, hash: last?.hash ?? GENESIS_HASH };
  const { keyId, pem } = await deps.signer.publicKey();
  const files = [...runBundleFiles(evidence), bundleFile(PUBLIC_KEY_PATH, pem)];
  const manifest: Manifest = {
    format: RUN_BUNDLE_FORMAT,
    runId: run.runId,
    tenantId: run.tenantId,
    runbook: { id: run.runbookId, version: run.runbookVersion, digest: run.runbookDigest },
    chainHead: { seq: head.seq, hash: head.hash },
    createdAt: deps.clock.now().toISOString(),
    keyId,
    files: files.map((f) => ({ path: f.path, sha256: f.sha256 })),
  };
  const signed = await signManifest(deps.signer, manifestBytes(manifest), keyId);
  const entries: TarEntry[] = [...signed, ...files.map((f) => ({ path: f.path, body: f.body }))];
  return gzipSync(writeTar(entries));
}

/**
 * GET /v1/runs/{id}/evidence.
 * Input: the caller and a run id. Output: the bundle's bytes and sha256.
 * Steps: the run must be the caller's (404) and finished (409); a bundle recorded for it is served
 * as stored; otherwise it is built from the event log and the stores, signed, written once to the
 * evidence bucket, and its key and sha256 recorded on the run (the first writer wins a race).
 */
export function makeGetEvidence(deps: EvidenceDeps) {
  return async function getEvidence(
    principal: Principal,
    runId: string,
  ): Promise<{ body: Uint8Array; sha256: string }> {
    requireRole(principal, ANY_ROLE, 'reading evidence');
    const { run } = await visibleRecord(deps.runs, principal, runId);
    if (!runStateMachine.isTerminal(run.status))
      throw new ConflictError(`run '${runId}' is ${run.status}; its evidence is sealed when it finishes`);
    const stored = await serveRecorded(deps, runId);
    if (stored) return stored;
    const body = await buildRunBundle(deps, run);
    const sha256 = sha256Of(body);
    const key = bundleKey(run, sha256);
    await deps.objects.put(key, body, 'application/gzip');
    if (await deps.index.record(runId, { key, sha256, createdAt: deps.clock.now().toISOString() }))
      return { body, sha256 };
    const winner = await serveRecorded(deps, runId);
    if (!winner) throw new Error(`the evidence of run ${runId} was recorded but cannot be read`);
    return winner;
  };
}

async function serveRecorded(deps: EvidenceDeps, runId: string) {
  const recorded = await deps.index.find(runId);
  if (!recorded) return undefined;
  const body = await deps.objects.get(recorded.key);
  if (!body) throw new Error(`the evidence of run ${runId} is recorded at ${recorded.key} but the object is missing`);
  if (sha256Of(body) !== recorded.sha256)
    throw new Error(`the evidence object of run ${runId} does not match its recorded sha256`);
  return { body, sha256: recorded.sha256 };
}

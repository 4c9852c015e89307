import type { Approval, Run, RunbookVersion, StepExecution } from '../domain/entities.js';
import type { ChainHead, RunEvent } from '../domain/events.js';
import type { RecordedReceipt } from '../domain/evidence/bundle.js';
import type { PolicyDocument } from '../domain/policy.js';
import type { Clock, Page } from './ports.js';

/** What evidence reads of a run: the run and its chain head, its log, executions and receipts. */
export interface EvidenceRunReader {
  load(runId: string): Promise<{ readonly run: Run; readonly head: ChainHead } | undefined>;
  events(runId: string, since: number, limit: number): Promise<RunEvent[]>;
  executions(runId: string): Promise<StepExecution[]>;
  receipt(key: string): Promise<RecordedReceipt | undefined>;
  list(tenantId: string, options: { limit: number; cursor?: string }): Promise<Page<Run>>;
}

export interface EvidenceApprovalReader {
  list(runId: string): Promise<Approval[]>;
}

export interface EvidenceRunbookReader {
  get(tenantId: string, runbookId: string, version: number): Promise<RunbookVersion | undefined>;
}

/** The evidence bucket: bundles and artifacts, written once under keys that name their run. */
export interface EvidenceObjects {
  get(key: string): Promise<Uint8Array | undefined>;
  put(key: string, body: Uint8Array, contentType: string): Promise<void>;
  /** Writes an object from chunks without holding it whole (multipart); resolves its size. */
  putStream(key: string, chunks: AsyncIterable<Uint8Array>, contentType: string): Promise<number>;
}

/** Where a run's bundle is, and its digest (seed 001 section 8: "a sha256 recorded in DB"). */
export interface BundleRecord {
  readonly key: string;
  readonly sha256: string;
  readonly createdAt: string;
}

export interface BundleIndex {
  find(runId: string): Promise<BundleRecord | undefined>;
  /** Records the run's bundle once; false when another writer recorded one first. */
  record(runId: string, bundle: BundleRecord): Promise<boolean>;
}

/** Signs manifests with the evidence key (KMS in AWS, a local key on the local stack). */
export interface ManifestSigner {
  /** The key's id and its public key as PEM (SPKI). */
  publicKey(): Promise<{ keyId: string; pem: string }>;
  /** An ECDSA P-256 signature (DER) over a SHA-256 digest. */
  signDigest(digest: Uint8Array): Promise<Uint8Array>;
}

export interface EvidenceDeps {
  readonly runs: EvidenceRunReader;
  readonly approvals: EvidenceApprovalReader;
  readonly runbooks: EvidenceRunbookReader;
  readonly objects: EvidenceObjects;
  readonly index: BundleIndex;
  readonly signer: ManifestSigner;
  readonly policy: PolicyDocument;
  readonly clock: Clock;
  /** The tenant's control log (quota, limit and breaker changes) that exports carry. */
  readonly controls?: ControlLogReader;
}

/** The control-log entries of a tenant, oldest first. */
export interface ControlLogReader {
  entries(tenantId: string): Promise<ReadonlyArray<Readonly<Record<string, unknown>>>>;
}

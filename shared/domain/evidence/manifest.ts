import { createHash } from 'node:crypto';
import { z } from 'zod';

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lower-case hex sha256');
const chainHeadSchema = z.strictObject({ seq: z.number().int().min(0), hash: sha256 });
const fileSchema = z.strictObject({ path: z.string().min(1), sha256 });
const runbookRefSchema = z.strictObject({ id: z.string(), version: z.number().int().positive(), digest: z.string() });

export const RUN_BUNDLE_FORMAT = 'capstan-evidence/1';
export const EXPORT_BUNDLE_FORMAT = 'capstan-export/1';

/** Files of a bundle that the manifest cannot list: itself and its signature. */
export const MANIFEST_PATH = 'manifest.json';
export const SIGNATURE_PATH = 'signatures/manifest.dsse.json';
export const PUBLIC_KEY_PATH = 'public-key.pem';

/** The manifest of one run's bundle (brief: "Evidence"). */
export const runManifestSchema = z.strictObject({
  format: z.literal(RUN_BUNDLE_FORMAT),
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  runbook: runbookRefSchema,
  chainHead: chainHeadSchema,
  createdAt: z.iso.datetime(),
  keyId: z.string().min(1),
  files: z.array(fileSchema),
});
export type RunManifest = z.infer<typeof runManifestSchema>;

/** One run inside a tenant export: where its files are and the chain head it ended on. */
const exportedRunSchema = z.strictObject({
  runId: z.string().min(1),
  runbook: runbookRefSchema,
  chainHead: chainHeadSchema,
  directory: z.string().min(1),
});

/** The manifest of a tenant export: every run of the window, plus the control-plane events. */
export const exportManifestSchema = z.strictObject({
  format: z.literal(EXPORT_BUNDLE_FORMAT),
  tenantId: z.string().min(1),
  since: z.iso.datetime(),
  until: z.iso.datetime(),
  createdAt: z.iso.datetime(),
  keyId: z.string().min(1),
  runs: z.array(exportedRunSchema),
  files: z.array(fileSchema),
});
export type ExportManifest = z.infer<typeof exportManifestSchema>;

export const manifestSchema = z.discriminatedUnion('format', [runManifestSchema, exportManifestSchema]);
export type Manifest = z.infer<typeof manifestSchema>;

/** Lower-case hex sha256 of bytes. */
export function sha256Of(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A file of a bundle as text, and its digest for the manifest. */
export function bundleFile(path: string, text: string): { path: string; body: Buffer; sha256: string } {
  const body = Buffer.from(text, 'utf8');
  return { path, body, sha256: sha256Of(body) };
}

/** JSON lines: one canonical-enough JSON value a line, each line ending in a newline. */
export function jsonLines(values: readonly unknown[]): string {
  return values.map((v) => `${JSON.stringify(v)}\n`).join('');
}

/** The manifest's bytes: stable key order as written, two-space indented, one trailing newline. */
export function manifestBytes(manifest: Manifest): Buffer {
  return Buffer.from(`${JSON.stringify(manifest, null, 2)}\n`, 'utf8');
}

import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { z } from 'zod';
import type { Principal, Run } from '../domain/entities.js';
import { NotFoundError, ValidationError } from '../domain/errors.js';
import { runBundleFiles } from '../domain/evidence/bundle.js';
import {
  bundleFile,
  EXPORT_BUNDLE_FORMAT,
  type ExportManifest,
  manifestBytes,
  PUBLIC_KEY_PATH,
} from '../domain/evidence/manifest.js';
import { TAR_END, tarEntry } from '../domain/evidence/tar.js';
import { GENESIS_HASH } from '../domain/events.js';
import { requireRole } from './authorize.js';
import { gatherEvidence, signManifest } from './evidence.js';
import type { EvidenceDeps } from './evidence-ports.js';

export const createExportBodySchema = z.strictObject({
  since: z.iso.datetime({ offset: true }),
  until: z.iso.datetime({ offset: true }).optional(),
});
export type CreateExportBody = z.infer<typeof createExportBodySchema>;

export const exportPathSchema = z.object({ id: z.string().regex(/^exp-[0-9a-f-]{36}$/, 'must be an export id') });

const exportKey = (tenantId: string, exportId: string) => `exports/${tenantId}/${exportId}.tar.gz`;
const RUN_PAGE = 100;

/** The tenant's runs created in [since, until], newest first, page by page. */
async function* runsInWindow(deps: EvidenceDeps, tenantId: string, since: number, until: number) {
  let cursor: string | undefined;
  do {
    const page = await deps.runs.list(tenantId, { limit: RUN_PAGE, ...(cursor !== undefined && { cursor }) });
    for (const run of page.items) {
      const created = Date.parse(run.createdAt);
      if (created < since) return;
      if (created <= until) yield run;
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
}

/**
 * POST /v1/exports.
 * Input: the caller and a window. Output: the export's id, size, sha256 and run count.
 * Steps: every run of the caller's tenant created in the window is read one at a time and
 * written as `runs/<id>/...` tar entries through gzip into a multipart upload, so no more than one
 * run is held in memory; then `controls.jsonl`, the public key, the manifest listing every file
 * with its digest and each run's chain head, and the manifest's DSSE signature close the archive.
 */
export function makeCreateExport(deps: EvidenceDeps) {
  return async function createExport(principal: Principal, body: CreateExportBody) {
    requireRole(principal, ['operator', 'admin'], 'exporting evidence');
    const createdAt = deps.clock.now();
    const since = Date.parse(body.since);
    const until = body.until === undefined ? createdAt.getTime() : Date.parse(body.until);
    if (until < since)
      throw new ValidationError('the window ends before it starts', [
        { path: 'until', message: 'must not be before since' },
      ]);
    const exportId = `exp-${randomUUID()}`;
    const { keyId, pem } = await deps.signer.publicKey();
    const manifest: ExportManifest = {
      format: EXPORT_BUNDLE_FORMAT,
      tenantId: principal.tenantId,
      since: new Date(since).toISOString(),
      until: new Date(until).toISOString(),
      createdAt: createdAt.toISOString(),
      keyId,
      runs: [],
      files: [],
    };

    async function* blocks(): AsyncGenerator<Uint8Array> {
      for await (const run of runsInWindow(deps, principal.tenantId, since, until)) {
        const evidence = await gatherEvidence(deps, run as Run);
        const last = evidence.events.at(-1);
        const directory = `runs/${run.runId}/`;
        manifest.runs.push({
          runId: run.runId,
          runbook: { id: run.runbookId, version: run.runbookVersion, digest: run.runbookDigest },
          chainHead: { seq: last?.seq ?? 0, hash: last?.hash ?? GENESIS_HASH },
          directory,
        });
        for (const file of runBundleFiles(evidence, directory)) {
          manifest.files.push({ path: file.path, sha256: file.sha256 });
          yield* tarEntry(file);
        }
      }
      // Quota, limit and breaker changes of the tenant made in the window, each with its actor and reason.
      const controls = (await deps.controls?.entries(principal.tenantId)) ?? [];
      const inWindow = controls.filter((c) => {
        const at = typeof c.at === 'string' ? Date.parse(c.at) : Number.NaN;
        return at >= since && at <= until;
      });
      const controlsText = inWindow.map((c) => `${JSON.stringify(c)}\n`).join('');
      for (const file of [bundleFile('controls.jsonl', controlsText), bundleFile(PUBLIC_KEY_PATH, pem)]) {
        manifest.files.push({ path: file.path, sha256: file.sha256 });
        yield* tarEntry(file);
      }
      for (const entry of await signManifest(deps.signer, manifestBytes(manifest), keyId)) yield* tarEntry(entry);
      yield TAR_END;
    }

    const hash = createHash('sha256');
    const gzip = Readable.from(blocks()).pipe(createGzip());
    async function* hashed(): AsyncGenerator<Uint8Array> {
      for await (const chunk of gzip as AsyncIterable<Buffer>) {
        hash.update(chunk);
        yield chunk;
      }
    }
    const size = await deps.objects.putStream(exportKey(principal.tenantId, exportId), hashed(), 'application/gzip');
    return {
      exportId,
      runs: manifest.runs.length,
      size,
      sha256: hash.digest('hex'),
      since: manifest.since,
      until: manifest.until,
    };
  };
}

/** GET /v1/exports/{id}: an export of the caller's tenant; another tenant's does not exist for them. */
export function makeGetExport(deps: Pick<EvidenceDeps, 'objects'>) {
  return async function getExport(principal: Principal, exportId: string): Promise<Uint8Array> {
    requireRole(principal, ['operator', 'admin'], 'downloading an export');
    const body = await deps.objects.get(exportKey(principal.tenantId, exportId));
    if (!body) throw new NotFoundError(`export '${exportId}' not found`);
    return body;
  };
}

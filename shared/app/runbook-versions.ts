import type { RunbookStore } from './ports.js';
import { NotFoundError } from '../domain/errors.js';
import type { RunbookVersion } from '../domain/entities.js';

/** The runbook version a run request names: the one asked for, or the latest. */
export async function versionOf(
  runbooks: RunbookStore,
  tenantId: string,
  body: { readonly runbookId: string; readonly version?: number | undefined },
): Promise<RunbookVersion> {
  let version: RunbookVersion | undefined;
  if (body.version !== undefined) {
    version = await runbooks.get(tenantId, body.runbookId, body.version);
  } else {
    const head = await runbooks.head(tenantId, body.runbookId);
    version = head && (await runbooks.get(tenantId, body.runbookId, head.latestVersion));
  }
  if (!version)
    throw new NotFoundError(
      `runbook '${body.runbookId}'${body.version === undefined ? '' : ` version ${body.version}`} not found`,
    );
  return version;
}

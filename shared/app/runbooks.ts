import type { Principal, RunbookVersion } from '../domain/entities.js';
import { ConflictError, NotFoundError } from '../domain/errors.js';
import type { Json } from '../domain/canonical.js';
import { runbookDigest } from '../domain/runbook.js';
import { parseRunbookSource, type RunbookFormat } from '../domain/runbook-source.js';
import type { Clock, Page, RunbookHead, RunbookStore } from './ports.js';

export interface RunbookDeps {
  readonly runbooks: RunbookStore;
  readonly clock: Clock;
}

export interface RegisterRunbookInput {
  readonly principal: Principal;
  readonly source: string;
  readonly format: RunbookFormat;
}

export interface RegisteredRunbook {
  readonly id: string;
  readonly version: number;
  readonly digest: string;
  /** False when the same content was already stored and its version is returned. */
  readonly created: boolean;
}

/**
 * Registers a runbook version.
 * Input: the document (YAML or JSON) and who registers it.
 * Output: its id, version and digest; the same content twice gives the same version.
 * Steps: validate completely (a ValidationError lists every issue), digest the normal form,
 * return the stored version with that digest if any, else store the next version.
 */
export function makeRegisterRunbook(deps: RunbookDeps) {
  return async function registerRunbook(input: RegisterRunbookInput): Promise<RegisteredRunbook> {
    const runbook = parseRunbookSource(input.source, input.format);
    const digest = runbookDigest(runbook);
    const { tenantId } = input.principal;
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const existing = await deps.runbooks.findByDigest(tenantId, runbook.name, digest);
      if (existing) return { id: runbook.name, version: existing.version, digest, created: false };
      const head = await deps.runbooks.head(tenantId, runbook.name);
      const version: RunbookVersion = {
        tenantId,
        runbookId: runbook.name,
        version: (head?.latestVersion ?? 0) + 1,
        digest,
        createdAt: deps.clock.now().toISOString(),
        createdBy: input.principal.subject,
        definition: runbook as unknown as Record<string, Json>,
      };
      if (await deps.runbooks.putVersion(version, runbook.description)) {
        return { id: runbook.name, version: version.version, digest, created: true };
      }
    }
    throw new ConflictError(`runbook '${runbook.name}' is being registered concurrently; try again`);
  };
}

/** Lists the tenant's runbooks with their latest versions, a page at a time. */
export function makeListRunbooks(deps: RunbookDeps) {
  return async function listRunbooks(input: {
    principal: Principal;
    limit: number;
    cursor?: string;
  }): Promise<Page<RunbookHead>> {
    return deps.runbooks.list(input.principal.tenantId, input.limit, input.cursor);
  };
}

/** One version of a runbook (the latest when no version is given); another tenant's is not found. */
export function makeGetRunbook(deps: RunbookDeps) {
  return async function getRunbook(input: {
    principal: Principal;
    runbookId: string;
    version?: number;
  }): Promise<RunbookVersion> {
    const { tenantId } = input.principal;
    const version = input.version ?? (await deps.runbooks.head(tenantId, input.runbookId))?.latestVersion;
    const found = version === undefined ? undefined : await deps.runbooks.get(tenantId, input.runbookId, version);
    if (!found) {
      throw new NotFoundError(
        input.version === undefined
          ? `runbook '${input.runbookId}' not found`
          : `runbook '${input.runbookId}' has no version ${input.version}`,
      );
    }
    return found;
  };
}

import type { RunbookVersion } from '../domain/entities.js';
import type { RunbookStore } from './ports.js';

/** Versions kept per process; a run reads its version at every Plan and Dispatch. */
const MAX_VERSIONS = 500;

/**
 * A runbook store whose `get` remembers versions: a stored version never changes (a new
 * definition is a new version), so Plan and Dispatch need not read it for every step.
 */
export function cachingVersions(store: RunbookStore): RunbookStore {
  const versions = new Map<string, RunbookVersion>();
  return {
    ...store,
    async get(tenantId, runbookId, version) {
      const key = `${tenantId}\u0000${runbookId}\u0000${version}`;
      const known = versions.get(key);
      if (known) return known;
      const found = await store.get(tenantId, runbookId, version);
      if (found) {
        if (versions.size >= MAX_VERSIONS) versions.delete(versions.keys().next().value ?? '');
        versions.set(key, found);
      }
      return found;
    },
  };
}

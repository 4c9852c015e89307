import type { Run } from '../../../domain/entities.js';
import { StaleWriteError } from '../../../domain/errors.js';
import { type AdmissionStore, type AdmissionWrite, type Cell, releasesOnEnd } from '../admission.js';

/** Cells by `<tenant>|<name>`, as the DynamoDB adapter keeps them in the tenant's partition. */
export type CellMap = Map<string, { value: Record<string, unknown>; n?: number }>;

const keyOf = (tenantId: string, name: string) => `${tenantId}|${name}`;

/** Applies one admission write to `cells`; false when its condition fails (nothing changes then). */
export function applyAdmissionWrite(intent: AdmissionWrite, cells: CellMap): boolean {
  const key = keyOf(intent.tenantId, intent.name);
  const current = cells.get(key);
  switch (intent.kind) {
    case 'takeCounter':
      if ((current?.n ?? 0) >= intent.max) return false;
      cells.set(key, { value: current?.value ?? {}, n: (current?.n ?? 0) + 1 });
      return true;
    case 'addCounter':
      cells.set(key, { value: current?.value ?? {}, n: (current?.n ?? 0) + intent.amount });
      return true;
    case 'putCell': {
      const { expect } = intent;
      if (expect === 'absent' && current) return false;
      if (expect !== undefined && expect !== 'absent' && current?.value[expect.field] !== expect.equals) return false;
      cells.set(key, { value: structuredClone(intent.value) });
      return true;
    }
    case 'deleteCell':
      if (intent.mustExist && !current) return false;
      cells.delete(key);
      return true;
  }
}

export const releasesOnEndOf = (before: Run, after: Run) => releasesOnEnd(before, after);

/** The admission store in memory over the cells the in-memory run store commits to. For use-case tests. */
export function makeInMemoryAdmissionStore(cells: CellMap): AdmissionStore {
  const noted = new Map<string, string>();
  return {
    async cells(tenantId, prefix, limit = 1_000) {
      const start = keyOf(tenantId, prefix);
      return [...cells]
        .filter(([key]) => key.startsWith(start))
        .sort(([a], [b]) => a.localeCompare(b))
        .slice(0, limit)
        .map(([key, cell]): Cell => ({
          name: key.slice(tenantId.length + 1),
          value: structuredClone(cell.value),
          ...(cell.n !== undefined && { n: cell.n }),
        }));
    },
    async commit(writes) {
      const tx: CellMap = new Map(cells);
      const codes = writes.map((w) => (applyAdmissionWrite(w, tx) ? 'None' : 'ConditionalCheckFailed'));
      if (codes.includes('ConditionalCheckFailed')) throw new StaleWriteError(codes);
      cells.clear();
      for (const [k, v] of tx) cells.set(k, v);
    },
    async markBacklog(tenantId, mark) {
      noted.set(tenantId, mark);
    },
    async backlogTenants() {
      return [...noted].map(([tenantId, mark]) => ({ tenantId, mark }));
    },
    async clearBacklog(tenantId, mark) {
      if (noted.get(tenantId) === mark) noted.delete(tenantId);
    },
  };
}

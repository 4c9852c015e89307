import { randomUUID } from 'node:crypto';
import type { Json } from '../../domain/canonical.js';
import type { Run } from '../../domain/entities.js';
import { PRIORITY_RANK } from '../../domain/admission/quotas.js';

/**
 * Admission state is a set of cells per tenant, each named: counters (`active#<scope>`,
 * `hour#<scope>#<window>`, `rate#<source>#<window>`), the backlog (`backlog#<rank>#<createdAt>#<runId>`),
 * dependency waiters (`waiter#<dependency>#<runId>`), controls (`c#quota#`, `c#limit#`, `c#breaker#`,
 * `c#bucket#`) and the control log (`log#<at>#<id>`). Writes to them commit with a run's change.
 */
export type AdmissionWrite =
  /** Takes one from a counter; refused when it already holds `max`. */
  | {
      readonly kind: 'takeCounter';
      readonly tenantId: string;
      readonly name: string;
      readonly max: number;
      readonly expiresAt?: string;
    }
  /** Adds to a counter without a condition (a release adds -1). */
  | { readonly kind: 'addCounter'; readonly tenantId: string; readonly name: string; readonly amount: number }
  /**
   * Puts a cell; `expect` `absent` refuses when it exists, `{ field, equals }` refuses unless the
   * stored value's field is `equals` (absent when `equals` is undefined).
   */
  | {
      readonly kind: 'putCell';
      readonly tenantId: string;
      readonly name: string;
      readonly value: { readonly [key: string]: Json };
      readonly expect?: 'absent' | { readonly field: string; readonly equals: string | undefined };
      readonly expiresAt?: string;
    }
  /** Deletes a cell; with `mustExist`, refused when it is already gone (so one caller takes it). */
  | { readonly kind: 'deleteCell'; readonly tenantId: string; readonly name: string; readonly mustExist: boolean };

export const BACKLOG = 'backlog#';
export const WAITER = 'waiter#';
export const CONTROL = 'c#';
export const LOG = 'log#';

/** A throttled run's place in its tenant's backlog: priority first, then age. */
export const backlogCell = (run: Pick<Run, 'priority' | 'createdAt' | 'runId'>) =>
  `${BACKLOG}${PRIORITY_RANK[run.priority]}#${run.createdAt}#${run.runId}`;
/** A backlog note's mark: when it was taken, and a nonce, so two notes in one millisecond differ. */
export const backlogMark = (at: string) => `${at}#${randomUUID()}`;

export const waiterCell = (dependency: string, runId: string) => `${WAITER}${dependency}#${runId}`;

/**
 * What a run gives back when it ends, in the same transaction as its terminal status: the active
 * counters it holds, and its backlog place if it ended while throttled.
 */
export function releasesOnEnd(before: Run, after: Run): AdmissionWrite[] {
  const releases: AdmissionWrite[] = (after.admission?.held ?? []).map((name) => ({
    kind: 'addCounter',
    tenantId: after.tenantId,
    name,
    amount: -1,
  }));
  if (before.status === 'throttled')
    releases.push({ kind: 'deleteCell', tenantId: after.tenantId, name: backlogCell(before), mustExist: false });
  return releases;
}

/** A cell as read. */
export interface Cell {
  readonly name: string;
  readonly value: Readonly<Record<string, unknown>>;
  readonly n?: number;
}

/** Reads of admission cells, and control changes that commit with their control-log entry. */
export interface AdmissionStore {
  /** Cells of a tenant whose name starts with `prefix`, in name order, at most `limit`. */
  cells(tenantId: string, prefix: string, limit?: number): Promise<Cell[]>;
  /** Commits admission writes alone, all or nothing (control changes with their log entry). */
  commit(writes: readonly AdmissionWrite[]): Promise<void>;
  /** Notes that a tenant has backlog, with a `mark` unique to this note; the admitter visits noted tenants. */
  markBacklog(tenantId: string, mark: string): Promise<void>;
  /** Tenants noted as having backlog, each with its note's mark. */
  backlogTenants(): Promise<Array<{ tenantId: string; mark: string }>>;
  /** Forgets a tenant's note if it still has `mark`, the note was not renewed since. */
  clearBacklog(tenantId: string, mark: string): Promise<void>;
}

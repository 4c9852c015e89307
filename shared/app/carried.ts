import type { CarriedRun, RunLog, RunRecord } from './ports/runs.js';

/**
 * The most a carried run may take of the interpreter's state (Step Functions allows 256 KB for
 * all of it): a larger one stays behind and the next task reads the run itself.
 */
export const MAX_CARRIED_BYTES = 32 * 1024;

/**
 * `record` as it may travel in the interpreter's state to the next task, which then acts on it
 * without a read; undefined when the store did not read or write it, or when it is too large.
 */
export function carriedOf(runs: Pick<RunLog, 'carry'>, record: RunRecord): CarriedRun | undefined {
  const carried = runs.carry(record);
  return carried && new TextEncoder().encode(JSON.stringify(carried)).length <= MAX_CARRIED_BYTES ? carried : undefined;
}

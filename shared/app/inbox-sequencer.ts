import type { RunLog } from './ports/runs.js';

/** How often a writer sequences one run's inbox at most; the live stream lags by about this much. */
const SEQUENCE_EVERY_MS = 250;

/**
 * A writer's sequencing of the runs it stages events for: at once when it has not sequenced that
 * run for `SEQUENCE_EVERY_MS`, else once at the end of that interval, so a worker running short
 * steps back to back sequences a few times a second rather than for every event. A writer that
 * loses the race leaves the rest to the winner and the next writer; the unit's completer drains
 * the inbox, and the reconciler sweeps what a dead writer left.
 */
export function makeSequencer(runs: Pick<RunLog, 'sequence'>): (runId: string) => Promise<void> {
  const sequencedAt = new Map<string, number>();
  const soon = new Set<string>();
  return async function sequenceSoon(runId) {
    const now = Date.now();
    const since = now - (sequencedAt.get(runId) ?? 0);
    if (since >= SEQUENCE_EVERY_MS) {
      // A run not sequenced for an interval needs no entry (none reads as "long ago"): a
      // long-lived worker keeps only the runs it wrote to lately.
      if (sequencedAt.size >= 1024)
        for (const [id, at] of sequencedAt) if (now - at >= SEQUENCE_EVERY_MS) sequencedAt.delete(id);
      sequencedAt.set(runId, now);
      await runs.sequence(runId, { eager: false });
      return;
    }
    if (soon.has(runId)) return;
    soon.add(runId);
    // Unreferenced: a pending sequencing never keeps a draining worker alive; the sweep takes it.
    setTimeout(() => {
      soon.delete(runId);
      sequencedAt.set(runId, Date.now());
      runs.sequence(runId, { eager: false }).catch(() => undefined);
    }, SEQUENCE_EVERY_MS - since).unref();
  };
}

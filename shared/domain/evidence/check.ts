import { gunzipSync } from 'node:zlib';
import { policyDocumentSchema } from '../policy.js';
import { parseRunbookObject } from '../runbook.js';
import { sealedReplay } from './replay.js';
import { readTar, TarFormatError } from './tar.js';
import { parseEventLines, type Verdict, verifyBundle } from './verify.js';

export type CheckVerdict =
  | (Extract<Verdict, { ok: true }> & { readonly replayed?: ReadonlyArray<{ runId: string; decisions: number }> })
  | { readonly ok: false; readonly check: string; readonly reason: string };

/**
 * Checks a gzipped bundle as `capstan verify` does, with nothing but its bytes (and a pinned key):
 * unpack, verify (signature, digests, chains, heads), and with `replay`, replay every run's
 * events through the planner. The first failure is the answer.
 */
export function checkBundle(
  gzipped: Uint8Array,
  options: { pinnedKeyPem?: string; replay?: boolean } = {},
): CheckVerdict {
  let entries;
  try {
    entries = readTar(gunzipSync(gzipped));
  } catch (error) {
    const reason = error instanceof TarFormatError ? error.message : `not a gzipped tar: ${(error as Error).message}`;
    return { ok: false, check: 'format', reason };
  }
  const verdict = verifyBundle(entries, options);
  if (!verdict.ok || !options.replay) return verdict;
  const text = (path: string) => {
    const entry = entries.find((e) => e.path === path);
    return entry && Buffer.from(entry.body).toString('utf8');
  };
  const manifest = verdict.manifest;
  const runs =
    manifest.format === 'capstan-evidence/1'
      ? [{ runId: manifest.runId, directory: '' }]
      : manifest.runs.map((r) => ({ runId: r.runId, directory: r.directory }));
  const replayed: Array<{ runId: string; decisions: number }> = [];
  for (const run of runs) {
    const [runbookText, policyText, eventsText] = ['runbook.json', 'policy-document.json', 'events.jsonl'].map((f) =>
      text(`${run.directory}${f}`),
    );
    if (runbookText === undefined || policyText === undefined || eventsText === undefined)
      return {
        ok: false,
        check: 'replay',
        reason: `run ${run.runId} lacks the runbook, policy or events a replay needs`,
      };
    const events = parseEventLines(eventsText);
    if ('line' in events) return { ok: false, check: 'replay', reason: `events line ${events.line} ${events.reason}` };
    let outcome;
    try {
      const definition = (JSON.parse(runbookText) as { definition?: unknown }).definition;
      outcome = sealedReplay(
        parseRunbookObject(definition),
        policyDocumentSchema.parse(JSON.parse(policyText)),
        events.events,
      );
    } catch (error) {
      return { ok: false, check: 'replay', reason: `run ${run.runId} cannot be replayed: ${(error as Error).message}` };
    }
    if (!outcome.ok) return { ok: false, check: 'replay', reason: `run ${run.runId}: ${outcome.reason}` };
    replayed.push({ runId: run.runId, decisions: outcome.decisions });
  }
  return { ...verdict, replayed };
}

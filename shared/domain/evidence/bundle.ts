import { canonicalJson, sha256Hex } from '../canonical.js';
import { findAction } from '../catalogue.js';
import type { Approval, Run, RunbookVersion, StepExecution } from '../entities.js';
import type { RunEvent } from '../events.js';
import type { PolicyDocument } from '../policy.js';
import { allSteps, parseRunbookObject } from '../runbook.js';
import { costRollup } from './rollup.js';
import { bundleFile, jsonLines } from './manifest.js';

/** What the store recorded for an effect, keyed by the execution's idempotency key. */
export interface RecordedReceipt {
  readonly key: string;
  readonly executionId: string;
  readonly outcome: string;
  readonly output?: unknown;
  readonly recordedAt: string;
}

/** A file a step stored under the run (seed 004 5.3). */
export interface ArtifactRecord {
  readonly name: string;
  readonly stepId: string;
  readonly targetId?: string;
  readonly size: number;
  readonly sha256: string;
}

/** Everything a run's bundle is made of, read from the stores. */
export interface RunEvidence {
  readonly run: Run;
  readonly runbook: RunbookVersion;
  readonly events: readonly RunEvent[];
  readonly approvals: readonly Approval[];
  readonly executions: readonly StepExecution[];
  readonly receipts: readonly RecordedReceipt[];
  readonly artifacts: readonly ArtifactRecord[];
  /** The deployment's policy the run was planned under, so a sealed replay can plan again. */
  readonly policy: PolicyDocument;
}

export type BundleFile = ReturnType<typeof bundleFile>;

/**
 * An action receipt as an auditor reads it (seed 001 section 1.4): what was attempted (the action,
 * its target and a digest of its params: params name secrets by id, never by value), what happened,
 * and whether and how it can be reversed.
 */
function receiptLines(evidence: RunEvidence): unknown[] {
  const runbook = parseRunbookObject(evidence.runbook.definition);
  const steps = new Map(allSteps(runbook).map(({ step }) => [step.id, step]));
  const byKey = new Map(evidence.receipts.map((r) => [r.key, r]));
  return evidence.executions
    .filter((e) => e.startedAt !== undefined)
    .sort((a, b) => (a.startedAt ?? '').localeCompare(b.startedAt ?? '') || a.executionId.localeCompare(b.executionId))
    .map((execution) => {
      const step = steps.get(execution.stepId);
      const body = execution.kind === 'rollback' ? step?.rollback : step;
      const spec = body ? findAction(body.backend, body.action) : undefined;
      const receipt = byKey.get(execution.idempotencyKey);
      const reverse = execution.kind === 'step' && step?.rollback ? step.rollback : undefined;
      return {
        executionId: execution.executionId,
        idempotencyKey: execution.idempotencyKey,
        stepId: execution.stepId,
        kind: execution.kind,
        targetId: execution.targetId,
        attempt: execution.attempt,
        request: {
          backend: body?.backend ?? 'unknown',
          action: body?.action ?? 'unknown',
          paramsSha256: body ? sha256Hex(canonicalJson(body.params)) : null,
          secretsUsed: execution.secretsUsed,
          startedAt: execution.startedAt,
        },
        response: {
          status: execution.status,
          endedAt: execution.endedAt ?? null,
          ...(execution.error && { error: execution.error }),
          ...(receipt && {
            receipt: { outcome: receipt.outcome, output: receipt.output ?? {}, recordedAt: receipt.recordedAt },
          }),
        },
        reversible: spec?.reversible === true || reverse !== undefined,
        reverse: reverse
          ? { backend: reverse.backend, action: reverse.action, via: 'runbook rollback' }
          : spec?.inverse
            ? { action: spec.inverse, via: 'catalogue inverse' }
            : null,
      };
    });
}

/** The policy's decisions as recorded in the chain, each with the seq that proves it. */
function policyLines(events: readonly RunEvent[]): unknown[] {
  return events
    .filter((e) => e.type === 'policy.decided' || (e.type === 'approval.resolved' && e.payload.byPolicy === true))
    .map((e) => ({ seq: e.seq, type: e.type, stepId: e.stepId ?? null, timestamp: e.timestamp, ...e.payload }));
}

/**
 * The files of a run's bundle, under `prefix` (empty for a single run, `runs/<id>/` in an export),
 * in a fixed order. The manifest, its signature and the public key are added by the caller.
 */
export function runBundleFiles(evidence: RunEvidence, prefix = ''): BundleFile[] {
  const at = (path: string) => `${prefix}${path}`;
  return [
    bundleFile(at('run.json'), `${JSON.stringify(evidence.run, null, 2)}\n`),
    bundleFile(at('runbook.json'), `${JSON.stringify(evidence.runbook, null, 2)}\n`),
    bundleFile(at('events.jsonl'), jsonLines(evidence.events)),
    bundleFile(at('approvals.jsonl'), jsonLines(evidence.approvals)),
    bundleFile(at('policy.jsonl'), jsonLines(policyLines(evidence.events))),
    bundleFile(at('policy-document.json'), `${JSON.stringify(evidence.policy, null, 2)}\n`),
    bundleFile(at('receipts.jsonl'), jsonLines(receiptLines(evidence))),
    bundleFile(at('artifacts.jsonl'), jsonLines(evidence.artifacts)),
    bundleFile(at('cost.json'), `${JSON.stringify(costRollup(evidence.events), null, 2)}\n`),
  ];
}

/** The artifacts a run's events record (`artifact.stored`), in the order they were stored. */
export function artifactsOf(events: readonly RunEvent[]): ArtifactRecord[] {
  const found = new Map<string, ArtifactRecord>();
  for (const e of events) {
    if (e.type !== 'artifact.stored') continue;
    const { name, size, sha256 } = e.payload;
    if (typeof name !== 'string' || typeof size !== 'number' || typeof sha256 !== 'string') continue;
    found.set(name, {
      name,
      stepId: e.stepId ?? '',
      ...(e.targetId !== undefined && { targetId: e.targetId }),
      size,
      sha256,
    });
  }
  return [...found.values()];
}

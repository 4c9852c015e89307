import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { writes } from '../../../shared/app/ports/writes.js';
import type { Approval } from '../../../shared/domain/entities.js';
import { flushMetrics, recordReconcileSummary } from '../../../shared/observability/metrics.js';
import { recordRunCommit } from '../../../shared/observability/run-metrics.js';
import { configureTracing, type SpanRecord, withSpan } from '../../../shared/observability/tracing.js';

let lines: string[];

beforeEach(() => {
  lines = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
});

afterEach(() => {
  // Nothing a test recorded is left for the next one.
  flushMetrics();
  vi.restoreAllMocks();
});

/** Every published value, as `name{dim=value,...}` → values, after a flush. */
function published(): Record<string, unknown> {
  flushMetrics();
  const out: Record<string, unknown> = {};
  for (const line of lines.flatMap((l) => l.split('\n')).filter((l) => l.includes('CloudWatchMetrics'))) {
    const doc = JSON.parse(line) as Record<string, unknown> & {
      _aws: { CloudWatchMetrics: Array<{ Dimensions: string[][]; Metrics: Array<{ Name: string }> }> };
    };
    const directive = doc._aws.CloudWatchMetrics[0];
    const dims = (directive?.Dimensions[0] ?? [])
      .filter((d) => d !== 'service')
      .map((d) => `${d}=${String(doc[d])}`)
      .join(',');
    for (const { Name } of directive?.Metrics ?? []) out[`${Name}{${dims}}`] = doc[Name];
  }
  return out;
}

const gate: Approval = {
  approvalId: 'a1',
  runId: 'r1',
  tenantId: 'acme',
  scope: 'step',
  scopeId: 'restart',
  round: 1,
  stepId: 'restart',
  proposedAction: 'script.run',
  status: 'requested',
  requiredApprovals: 1,
  decisions: [],
  rule: 'high-blast',
  reason: 'high blast radius',
  blastRadius: 'high',
  requestedBy: 'olive',
  requestedAt: '2026-01-01T00:00:00.000Z',
  slaDeadline: '2026-01-01T00:15:00.000Z',
  hardDeadline: '2026-01-01T01:00:00.000Z',
};

describe('run commit metrics', () => {
  it('counts a status change by from and to, and a creation from none', () => {
    recordRunCommit(undefined, { status: 'queued' }, [], 'dev');
    recordRunCommit({ status: 'queued' }, { status: 'running' }, [], 'dev');
    recordRunCommit({ status: 'running' }, { status: 'running' }, [], 'dev');
    expect(published()).toEqual({
      'session_state_transitions_total{from=none,to=queued}': 1,
      'session_state_transitions_total{from=queued,to=running}': 1,
    });
  });

  it('publishes the wait of a resolved gate in seconds, and an escalation as an SLA breach', () => {
    const approved: Approval = { ...gate, status: 'approved', resolvedAt: '2026-01-01T00:02:30.000Z' };
    const escalated: Approval = { ...gate, approvalId: 'a2', status: 'escalated', escalatedAt: gate.slaDeadline };
    recordRunCommit(
      { status: 'waiting_for_approval' },
      { status: 'running' },
      [writes.updateApproval(approved, gate), writes.updateApproval(escalated, gate)],
      'prod',
    );
    expect(published()).toMatchObject({
      'approval_wait_duration_seconds{environment=prod}': 150,
      'approval_sla_breaches_total{environment=prod}': 1,
    });
  });

  it('records an approval.wait span from the request to the resolution, under the active span', async () => {
    const spans: SpanRecord[] = [];
    configureTracing({ sink: (span) => spans.push(span), service: 'test' });
    const approved: Approval = { ...gate, status: 'approved', resolvedAt: '2026-01-01T00:02:30.000Z' };
    await withSpan('decide', {}, async () =>
      recordRunCommit(
        { status: 'waiting_for_approval' },
        { status: 'running' },
        [writes.updateApproval(approved, gate)],
        'dev',
      ),
    );
    const wait = spans.find((s) => s.name === 'approval.wait');
    const decide = spans.find((s) => s.name === 'decide');
    expect(wait).toMatchObject({
      parentId: decide?.spanId,
      traceId: decide?.traceId,
      startTime: Date.parse(gate.requestedAt) / 1000,
      endTime: Date.parse('2026-01-01T00:02:30.000Z') / 1000,
      attributes: { runId: 'r1', approvalId: 'a1', status: 'approved' },
    });
    configureTracing({ sink: () => undefined, service: 'capstan' });
  });

  it('publishes nothing for a gate whose status did not change', () => {
    const decided: Approval = {
      ...gate,
      decisions: [{ approver: 'amy', decision: 'approve', decidedAt: gate.requestedAt, byPolicy: false }],
    };
    recordRunCommit({ status: 'running' }, { status: 'running' }, [writes.updateApproval(decided, gate)], 'dev');
    expect(published()).toEqual({});
  });
});

describe('reconciler metrics', () => {
  it('publishes each repair made by kind, and the stuck runs even when there are none', () => {
    recordReconcileSummary({ deadWorkers: 2, leasesExpired: 0, statesFixed: 1, stuckRuns: 0 });
    expect(published()).toEqual({
      'reconciler_repairs_total{repair=deadWorkers}': 2,
      'reconciler_repairs_total{repair=statesFixed}': 1,
      'stuck_runs{}': 0,
    });
  });
});

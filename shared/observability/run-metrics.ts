import type { WriteIntent } from '../app/ports/writes.js';
import type { Run } from '../domain/entities.js';
import { recordMetric } from './metrics.js';
import { recordSpan } from './tracing.js';

/** A run's status before a committed change, or `none` for the run's creation. */
type Before = Pick<Run, 'status'> | undefined;

const RESOLVED = new Set(['approved', 'rejected', 'expired', 'cancelled']);

/**
 * Publishes what one committed change to a run means to an operator: its status transition
 * (`session_state_transitions_total` by from and to), the wait of every gate it resolved
 * (`approval_wait_duration_seconds`), and every gate it escalated past its SLA
 * (`approval_sla_breaches_total`), with an `approval.wait` span from request to resolution (seed 000
 * section 6.3). Called once per commit by the run log, so every writer is
 * counted and none twice.
 */
export function recordRunCommit(
  before: Before,
  after: Pick<Run, 'status'>,
  writes: readonly WriteIntent[],
  environment: string,
): void {
  if (before?.status !== after.status)
    recordMetric('runStateTransitions', 1, { from: before?.status ?? 'none', to: after.status });
  for (const write of writes) {
    if (write.kind !== 'updateApproval' || write.was.status === write.approval.status) continue;
    const { approval } = write;
    if (approval.status === 'escalated') recordMetric('approvalSlaBreaches', 1, { environment });
    if (RESOLVED.has(approval.status) && approval.resolvedAt) {
      const waited = (Date.parse(approval.resolvedAt) - Date.parse(approval.requestedAt)) / 1000;
      recordMetric('approvalWait', Math.max(0, waited), { environment });
      recordSpan(
        'approval.wait',
        { start: new Date(approval.requestedAt), end: new Date(approval.resolvedAt) },
        { runId: approval.runId, approvalId: approval.approvalId, status: approval.status },
      );
    }
  }
}

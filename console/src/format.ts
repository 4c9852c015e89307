import type { RunDetail, RunEvent, RunStatus } from './api.js';

/** "12 s", "4 min", "3 h", "2 d": how long ago `iso` was, as of `now`. */
export function age(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '';
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h`;
  return `${Math.floor(seconds / 86_400)} d`;
}

/** "1.2 s" between two instants; empty when one is missing. */
export function duration(from: string | undefined, to: string | undefined): string {
  if (!from || !to) return '';
  const ms = Date.parse(to) - Date.parse(from);
  return ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60_000)} min`;
}

export const TERMINAL: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled'];
export const RUN_STATUSES: readonly RunStatus[] = [
  'queued',
  'throttled',
  'running',
  'waiting_for_approval',
  'paused',
  'rolling_back',
  'succeeded',
  'failed',
  'cancelled',
];

/** A status as words ("waiting for approval"). */
export const statusWords = (status: string): string => status.replace(/_/g, ' ');

/** The status an event moves a run to, for live rows between two reads of the list. */
export function statusAfter(event: RunEvent): RunStatus | undefined {
  const map: Partial<Record<string, RunStatus>> = {
    'run.started': 'running',
    'run.throttled': 'throttled',
    'approval.requested': 'waiting_for_approval',
    'approval.resolved': 'running',
    'run.paused': 'paused',
    'rollback.started': 'rolling_back',
    'run.succeeded': 'succeeded',
    'run.failed': 'failed',
    'run.cancelled': 'cancelled',
  };
  return map[event.type];
}

interface ApprovalWait {
  kind: 'approval';
  stepId: string;
  proposedAction: string;
  requiredApprovals: number;
  approvals: number;
  slaDeadline: string;
}
interface OperatorWait {
  kind: 'operator';
  reason: string;
  stepId?: string;
  rejected?: { decisions: ReadonlyArray<{ approver: string; decision: string }> };
}
interface ThrottleWait {
  kind: 'throttle';
  limit?: string;
  source?: string;
  nextEligibleAt?: string;
}
type Waiting = ApprovalWait | OperatorWait | ThrottleWait;

const isWaiting = (value: unknown): value is Waiting =>
  typeof value === 'object' &&
  value !== null &&
  ['approval', 'operator', 'throttle'].includes(String((value as { kind?: unknown }).kind));

/** Why a run failed, waits or is paused, in a sentence; undefined for a run that is moving or done well. */
export function reasonInWords(run: RunDetail): string | undefined {
  if (run.status === 'failed' && run.error)
    return `Failed${run.error.stepId ? ` at step ${run.error.stepId}` : ''}: ${run.error.message} (${run.error.code}).`;
  const waiting = isWaiting(run.waitingFor) ? run.waitingFor : undefined;
  if (!waiting) return run.status === 'queued' ? 'Queued: waiting to be admitted.' : undefined;
  if (waiting.kind === 'approval')
    return `Waiting for approval of step ${waiting.stepId} (${waiting.proposedAction}): ${waiting.approvals} of ${waiting.requiredApprovals} approvals, due by ${new Date(waiting.slaDeadline).toLocaleString()}.`;
  if (waiting.kind === 'operator') {
    const rejectedBy = (waiting.rejected?.decisions ?? [])
      .filter((d) => d.decision === 'reject' && !waiting.reason.includes(d.approver))
      .map((d) => d.approver);
    return `Paused for an operator${waiting.stepId ? ` at step ${waiting.stepId}` : ''}: ${waiting.reason}${
      rejectedBy.length > 0 ? ` (rejected by ${rejectedBy.join(', ')})` : ''
    }. Resume it with retry, rollback or cancel.`;
  }
  const again = waiting.nextEligibleAt
    ? `; admission looks again from ${new Date(waiting.nextEligibleAt).toLocaleString()}`
    : '';
  switch (waiting.limit) {
    case 'paused':
      return `Throttled: ${waiting.source ?? 'its source'} is paused; it waits until resumed.`;
    case 'throttle':
      return `Throttled: ${waiting.source ?? 'its source'} is throttled${again}.`;
    case 'breaker':
      return `Throttled: the circuit breaker of ${waiting.source ?? 'its runbook'} is open${again}.`;
    case 'backlog':
      return `Throttled: its sandbox profile's queue is full${again}.`;
    default:
      return `Throttled by a quota${waiting.limit ? ` (${waiting.limit})` : ''}${again}.`;
  }
}

/** One event as a line of the timeline. */
export function eventWords(event: RunEvent): string {
  const p = event.payload as Record<string, unknown>;
  const text = (key: string) => (typeof p[key] === 'string' ? String(p[key]) : undefined);
  switch (event.type) {
    case 'step.output':
      return `${text('stream') ?? 'stdout'}: ${text('text') ?? ''}`;
    case 'approval.decision_recorded':
    case 'approval.resolved':
      return [text('approver'), text('decision') ?? text('status') ?? text('outcome'), text('notes')]
        .filter(Boolean)
        .join(' · ');
    case 'step.failed':
    case 'run.failed': {
      const error = p.error as { message?: unknown } | undefined;
      return typeof error?.message === 'string' ? error.message : (text('message') ?? '');
    }
    default:
      return text('reason') ?? text('message') ?? '';
  }
}

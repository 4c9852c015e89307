import type { Approval, ErrorInfo, StepExecution } from '../entities.js';
import type { RunEvent } from '../events.js';
import { type PlanDecision, type PlanInput, plan } from '../planner.js';
import type { PolicyDocument } from '../policy.js';
import type { Runbook } from '../runbook.js';
import { approvalStatusSchema, stepExecutionStatusSchema } from '../statuses.js';

/**
 * Sealed replay (seed 004 section 7, Temporal's replayer): the recorded events are fed, one by
 * one, into the state the planner reads, and at every event that records one of its decisions
 * (a dispatch, a gate, an end) the pure planner is asked again with the time of that event. The
 * same decisions in the same order mean the log is one the planner would have written; the first
 * that differs is named. Operator and worker events change the state the planner reads but are
 * not decisions of its own.
 */

/** A decision as the log records it, reduced to what must match. */
export type DecisionKey =
  | { action: 'dispatch'; stepId: string; kind: string; attempt: number }
  | { action: 'await_approval'; stepId: string; approvalId: string }
  | { action: 'succeed' }
  | { action: 'fail' }
  | { action: 'cancelled' };

export type ReplayVerdict =
  | { readonly ok: true; readonly decisions: number }
  | {
      readonly ok: false;
      readonly decision: number;
      readonly seq: number;
      readonly recorded: DecisionKey;
      readonly planned: DecisionKey | { action: string };
      readonly reason: string;
    };

type Execution = PlanInput['executions'][number];
type Gate = NonNullable<PlanInput['approvals']>[number];

/** The decision a recorded event stands for, if it is one the planner makes. */
export function recordedDecision(event: RunEvent): DecisionKey | undefined {
  const p = event.payload;
  switch (event.type) {
    case 'step.dispatched':
      return {
        action: 'dispatch',
        stepId: event.stepId ?? '',
        kind: typeof p.kind === 'string' ? p.kind : 'step',
        attempt: typeof p.attempt === 'number' ? p.attempt : 0,
      };
    case 'approval.requested':
      return { action: 'await_approval', stepId: event.stepId ?? '', approvalId: String(p.approvalId) };
    case 'run.succeeded':
      return { action: 'succeed' };
    case 'run.cancelled':
      return { action: 'cancelled' };
    case 'run.failed': {
      // A run the interpreter gave up on after its tasks kept faulting did not fail by a plan.
      const error = p.error as { code?: unknown } | null | undefined;
      return error?.code === 'DISPATCH_LOOP' ? undefined : { action: 'fail' };
    }
    default:
      return undefined;
  }
}

function keyOf(decision: PlanDecision): DecisionKey | { action: string } {
  switch (decision.action) {
    case 'dispatch':
      return { action: 'dispatch', stepId: decision.stepId, kind: decision.kind, attempt: decision.attempt };
    case 'await_approval':
      return { action: 'await_approval', stepId: decision.stepId, approvalId: decision.approvalId };
    case 'succeed':
    case 'fail':
    case 'cancelled':
      return { action: decision.action };
    default:
      return { action: decision.action };
  }
}

const describe = (key: DecisionKey | { action: string }) =>
  'stepId' in key
    ? `${key.action} ${key.stepId}${'attempt' in key ? ` (${key.kind}, attempt ${key.attempt})` : ` (${key.approvalId})`}`
    : key.action;

/** The run and step state the planner reads, rebuilt from events. */
class ReplayState {
  status: PlanInput['run']['status'] = 'queued';
  cancelRequested = false;
  rollbackRequested = false;
  createdAt = '';
  startedAt: string | undefined;
  error: ErrorInfo | undefined;
  operatorRetry: { stepId: string; attempt: number } | undefined;
  readonly executions = new Map<string, Execution>();
  readonly approvals = new Map<string, Gate>();

  constructor(readonly runId: string) {}

  private executionsOf(stepId: string, kind: string, attempt: number): Execution[] {
    return [...this.executions.values()].filter((e) => e.stepId === stepId && e.kind === kind && e.attempt === attempt);
  }

  private put(e: Execution): void {
    this.executions.set(`${e.stepId}/${e.kind}/${e.attempt}/${e.targetId}`, e);
  }

  apply(event: RunEvent): void {
    const p = event.payload;
    const kind = p.kind === 'rollback' ? 'rollback' : 'step';
    const attempt = typeof p.attempt === 'number' ? p.attempt : 1;
    const stepId = event.stepId ?? '';
    switch (event.type) {
      case 'run.created':
        this.createdAt = event.timestamp;
        return;
      case 'run.started':
        this.status = 'running';
        this.startedAt = event.timestamp;
        return;
      case 'run.cancel_requested':
        this.cancelRequested = true;
        return;
      case 'run.paused':
        this.status = 'paused';
        this.error = { code: 'PAUSED', message: String(p.reason ?? 'paused') };
        return;
      case 'run.resumed': {
        this.status = 'running';
        this.error = undefined;
        if (p.directive === 'retry') this.operatorRetry = this.lastFailure();
        return;
      }
      case 'rollback.started':
        if (p.requestedBy !== undefined) this.rollbackRequested = true;
        this.status = 'rolling_back';
        return;
      case 'step.dispatched': {
        const targets = Array.isArray(p.targets) ? p.targets.map(String) : [];
        for (const targetId of targets)
          this.put({ stepId, kind, attempt, targetId, status: 'pending', startedAt: undefined, endedAt: undefined });
        if (this.status !== 'paused') this.status = kind === 'rollback' ? this.status : 'running';
        return;
      }
      case 'step.started':
        this.update(event, (e) => ({ ...e, status: 'running', startedAt: event.timestamp }));
        return;
      case 'step.succeeded':
        this.update(event, (e) => ({ ...e, status: 'succeeded', endedAt: event.timestamp }));
        return;
      case 'step.failed': {
        const status = stepExecutionStatusSchema.safeParse(p.outcome);
        const error = p.error as ErrorInfo | null | undefined;
        const ended = (e: Execution): Execution => ({
          ...e,
          status: status.success ? status.data : 'failed',
          endedAt: event.timestamp,
          ...(error ? { error } : {}),
        });
        // A step refused at dispatch fails every target at once, with no dispatch before it.
        if (event.targetId === undefined && this.executionsOf(stepId, kind, attempt).length === 0)
          this.put(ended({ stepId, kind, attempt, targetId: '*', status: 'pending' }));
        else this.update(event, ended);
        return;
      }
      case 'approval.requested':
        this.status = 'waiting_for_approval';
        this.approvals.set(String(p.approvalId), {
          approvalId: String(p.approvalId),
          scope: p.scope === 'phase' || p.scope === 'run' ? p.scope : 'step',
          scopeId: String(p.scopeId),
          round: typeof p.round === 'number' ? p.round : 1,
          status: 'requested',
          slaDeadline: String(p.slaDeadline),
          hardDeadline: String(p.hardDeadline),
        });
        return;
      case 'approval.expired': {
        const gate = this.approvals.get(String(p.approvalId));
        if (gate && p.escalated === true) this.approvals.set(gate.approvalId, { ...gate, status: 'escalated' });
        return;
      }
      case 'approval.resolved': {
        const gate = this.approvals.get(String(p.approvalId));
        const status = approvalStatusSchema.safeParse(p.status);
        if (gate && status.success) this.approvals.set(gate.approvalId, { ...gate, status: status.data });
        if (status.success && status.data === 'expired' && this.status === 'waiting_for_approval')
          this.status = 'running';
        return;
      }
      default:
        return;
    }
  }

  /** Applies `change` to the executions an event is about: its target's, or all of its attempt's. */
  private update(event: RunEvent, change: (e: Execution) => Execution): void {
    const p = event.payload;
    const kind = p.kind === 'rollback' ? 'rollback' : 'step';
    const attempt = typeof p.attempt === 'number' ? p.attempt : 1;
    for (const e of this.executionsOf(event.stepId ?? '', kind, attempt))
      if (event.targetId === undefined || e.targetId === event.targetId) this.put(change(e));
  }

  private lastFailure(): { stepId: string; attempt: number } | undefined {
    const failed = [...this.executions.values()].filter(
      (e) => e.kind === 'step' && e.status !== 'succeeded' && e.endedAt,
    );
    const last = failed.sort((a, b) => (a.endedAt ?? '').localeCompare(b.endedAt ?? '')).at(-1);
    return last && { stepId: last.stepId, attempt: last.attempt };
  }

  input(runbook: Runbook, policy: PolicyDocument, now: Date): PlanInput {
    return {
      runbook,
      run: {
        runId: this.runId,
        status: this.status,
        cancelRequested: this.cancelRequested,
        rollbackRequested: this.rollbackRequested,
        createdAt: this.createdAt,
        ...(this.startedAt !== undefined && { startedAt: this.startedAt }),
        ...(this.error !== undefined && { error: this.error }),
        ...(this.operatorRetry !== undefined && { operatorRetry: this.operatorRetry }),
      },
      executions: [...this.executions.values()] as ReadonlyArray<
        Pick<StepExecution, 'stepId' | 'kind' | 'attempt' | 'status' | 'startedAt' | 'endedAt' | 'error' | 'targetId'>
      >,
      now,
      policy,
      approvals: [...this.approvals.values()] as ReadonlyArray<
        Pick<Approval, 'approvalId' | 'scope' | 'scopeId' | 'round' | 'status' | 'slaDeadline' | 'hardDeadline'>
      >,
    };
  }
}

/** Replays a run's recorded events through the planner; names the first decision that differs. */
export function sealedReplay(runbook: Runbook, policy: PolicyDocument, events: readonly RunEvent[]): ReplayVerdict {
  const state = new ReplayState(events[0]?.runId ?? '');
  let decisions = 0;
  for (const event of events) {
    const recorded = recordedDecision(event);
    if (recorded) {
      decisions++;
      const planned = keyOf(plan(state.input(runbook, policy, new Date(event.timestamp))));
      if (JSON.stringify(planned) !== JSON.stringify(recorded))
        return {
          ok: false,
          decision: decisions,
          seq: event.seq,
          recorded,
          planned,
          reason: `decision ${decisions} (seq ${event.seq}, ${event.type}) diverges: the log records ${describe(recorded)}, the planner decides ${describe(planned)}`,
        };
    }
    state.apply(event);
  }
  return { ok: true, decisions };
}

import type { Approval, ErrorInfo, Run, StepExecution } from '../domain/entities.js';
import { isOpen } from '../domain/approvals.js';

/** How one step stands in a run view. */
export interface StepView {
  readonly id: string;
  readonly phase: string;
  readonly backend: string;
  readonly action: string;
  readonly status: 'pending' | 'running' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';
  readonly attempts: number;
  /** For a step with a target: the node ids it resolved to at its first dispatch. */
  readonly expected?: readonly string[];
  /** How many targets stand in each status. */
  readonly counts?: Readonly<Record<string, number>>;
  readonly targets: ReadonlyArray<TargetView>;
  readonly rollback?: { status: StepExecution['status'] };
}

/** One target of a step in the run view: its latest execution, or where rate control keeps it. */
export interface TargetView {
  readonly id: string;
  /** The same as `id`, kept for older clients. */
  readonly targetId: string;
  /** `waiting`: rate control has not started it yet; `skipped`: it never started. */
  readonly status: StepExecution['status'] | 'waiting' | 'skipped';
  readonly attempt: number;
  readonly startedAt?: string;
  readonly endedAt?: string;
  readonly outputTail: readonly string[];
  readonly error?: StepExecution['error'];
  readonly workerId?: string;
  readonly secretsUsed?: readonly string[];
}

/** Why a run failed, for the run detail: the stored error and the step it is about. */
export interface RunErrorView {
  readonly code: string;
  readonly message: string;
  readonly stepId?: string;
}

/** What a run that is not moving waits for, for the run detail. */
export type WaitingFor =
  | {
      readonly kind: 'approval';
      readonly approvalId: string;
      readonly stepId: string;
      readonly proposedAction: string;
      readonly requiredApprovals: number;
      readonly approvals: number;
      readonly decisions: ReadonlyArray<{ approver: string; decision: string; decidedAt: string }>;
      readonly slaDeadline: string;
      readonly hardDeadline: string;
      /** The request that decides it. */
      readonly decide: string;
    }
  | {
      readonly kind: 'operator';
      readonly reason: string;
      readonly stepId?: string;
      /** The gate whose rejection paused the run, with who decided. */
      readonly rejected?: { approvalId: string; decisions: ReadonlyArray<{ approver: string; decision: string }> };
      readonly directives: readonly ['retry', 'rollback', 'cancel'];
      readonly resume: string;
    }
  | {
      readonly kind: 'throttle';
      /** The limit that holds the run (`paused`, `maxActive`, `throttle`, `breaker`, `backlog`, ...). */
      readonly limit?: string;
      /** The source a pause or throttle names, or the runbook whose breaker is open. */
      readonly source?: string;
      /** When admission looks at the run again; a paused run waits past it until it is resumed. */
      readonly nextEligibleAt?: string;
    }
  | { readonly kind: 'ticket'; readonly ticketId: string; readonly behind: string }
  | {
      readonly kind: 'dependencies';
      /** Every run it depends on, and those of them that have not succeeded yet. */
      readonly dependsOn: readonly string[];
      readonly pending: ReadonlyArray<{ readonly runId: string; readonly status: string }>;
    };

/** The error of a failed run, naming the step that failed when one did. */
export function runErrorView(run: Run, steps: readonly StepView[]): RunErrorView | undefined {
  if (run.status !== 'failed' || !run.error) return undefined;
  const failed = steps.find((s) => s.status === 'failed')?.id ?? run.currentStepId;
  return { code: run.error.code, message: run.error.message, ...(failed !== undefined && { stepId: failed }) };
}

const latestRound = (approvals: readonly Approval[]) =>
  approvals.reduce<Approval | undefined>(
    (last, a) => (last === undefined || a.requestedAt > last.requestedAt ? a : last),
    undefined,
  );

/** What a waiting, paused or throttled run waits for; undefined for a run that is moving or ended. */
export function waitingForView(
  run: Run,
  approvals: readonly Approval[],
  /** The statuses of the runs a queued run depends on, by run id. */
  dependencies: ReadonlyMap<string, string> = new Map(),
): WaitingFor | undefined {
  const runPath = `/v1/runs/${run.runId}`;
  if (run.status === 'waiting_for_approval') {
    const open = latestRound(approvals.filter((a) => isOpen(a.status)));
    if (!open) return undefined;
    return {
      kind: 'approval',
      approvalId: open.approvalId,
      stepId: open.stepId,
      proposedAction: open.proposedAction,
      requiredApprovals: open.requiredApprovals,
      approvals: open.decisions.filter((d) => d.decision === 'approve').length,
      decisions: open.decisions.map((d) => ({ approver: d.approver, decision: d.decision, decidedAt: d.decidedAt })),
      slaDeadline: open.slaDeadline,
      hardDeadline: open.hardDeadline,
      decide: `POST ${runPath}/approvals/${open.approvalId} {"decision": "approve"|"reject"}`,
    };
  }
  if (run.status === 'paused') {
    const rejected = latestRound(approvals.filter((a) => a.status === 'rejected'));
    const error: ErrorInfo | undefined = run.error;
    return {
      kind: 'operator',
      reason: run.pausedReason ?? error?.message ?? 'paused for an operator',
      ...(run.currentStepId !== undefined && { stepId: run.currentStepId }),
      ...(rejected && {
        rejected: {
          approvalId: rejected.approvalId,
          decisions: rejected.decisions.map((d) => ({ approver: d.approver, decision: d.decision })),
        },
      }),
      directives: ['retry', 'rollback', 'cancel'],
      resume: `POST ${runPath}/resume {"directive": "retry"|"rollback"|"cancel"}`,
    };
  }
  if (run.status === 'throttled')
    return {
      kind: 'throttle',
      ...(run.heldBy && { limit: run.heldBy.limit }),
      ...(run.heldBy?.source !== undefined && { source: run.heldBy.source }),
      ...(run.nextEligibleAt !== undefined && { nextEligibleAt: run.nextEligibleAt }),
    };
  if (run.status === 'queued' && !run.admission && run.queuedBehind !== undefined && run.ticket)
    return { kind: 'ticket', ticketId: run.ticket.id, behind: run.queuedBehind };
  if (run.status === 'queued' && !run.admission && run.dependsOn && run.dependsOn.length > 0)
    return {
      kind: 'dependencies',
      dependsOn: run.dependsOn,
      pending: run.dependsOn
        .map((runId) => ({ runId, status: dependencies.get(runId) ?? 'unknown' }))
        .filter((d) => d.status !== 'succeeded'),
    };
  return undefined;
}

import type { InventoryReader } from './ports/inventory.js';
import type { ApprovalStore } from './ports/approvals.js';
import type { RunRecord, RunStore } from './ports/runs.js';
import type { Run, StepExecution } from '../domain/entities.js';
import { allSteps } from '../domain/runbook.js';
import { stepExecutionStateMachine } from '../domain/statuses.js';
import { isStuck } from '../domain/stuck.js';
import { heldByAdmission, waitsBeforeAdmission } from '../domain/admission/held.js';
import { isSilent } from '../domain/workers.js';
import type { CommandQueue, TaskCallbacks } from './ports/interpreter.js';
import type { ApprovalAlerts, Clock, RunbookStore, WorkerStore } from './ports.js';
import { makeApplyDue } from './approval-timer.js';
import { wake } from './waits.js';
import { runbookOf } from './runs.js';
import { makeRecoverLost } from './recovery.js';
import { makeFanout } from './fanout.js';
import { makeRepairStalled } from './stalled-dispatch.js';
import type { RunEvent } from '../domain/events.js';
import type { Admitted } from './admission.js';
import { claimAndResume, completionOutput } from './completion.js';

/** The interpreter as the reconciler sees it. */
export interface InterpreterControl {
  /** `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT`, `ABORTED`, or `MISSING`. */
  status(executionArn: string): Promise<string>;
  /** The execution a run was first started with (named for the run, so derived rather than stored). */
  executionArnOf(runId: string): string;
  /** Starts a new execution for the run; it plans from the stored state. */
  restart(run: Pick<Run, 'runId' | 'tenantId'>, at: Date): Promise<string>;
}

export interface ReconcilerDeps {
  readonly runs: RunStore;
  readonly runbooks: RunbookStore;
  readonly workers: WorkerStore;
  readonly callbacks: TaskCallbacks;
  /** Sends a command again whose first send a crash prevented. */
  readonly queue: CommandQueue;
  /** For the fan-out repairs: a command for an offline agent node fails instead of waiting. */
  readonly inventory?: InventoryReader;
  readonly approvals: ApprovalStore;
  /** Sends escalations of gates past their SLA. */
  readonly alerts?: ApprovalAlerts;
  readonly interpreter: InterpreterControl;
  readonly clock: Clock;
  readonly heartbeatMs: number;
  /**
   * Looks again at a run that waits before admission (behind its ticket's active run, or on its
   * dependencies), in case the word that it may go was lost; absent, such runs are left alone.
   */
  readonly settleWaiting?: (runId: string) => Promise<Admitted>;
  /**
   * Notes a tenant with quiet throttled runs as having backlog, in case the note was lost (a
   * crash between a run's backlog place and its note); absent, throttled runs are left alone.
   */
  readonly noteBacklog?: (tenantId: string) => Promise<void>;
  readonly log: (message: string, fields?: Record<string, unknown>) => void;
}

export interface ReconcileSummary {
  deadWorkers: number;
  leasesExpired: number;
  /** Lost step executions that get a new attempt. */
  recovered: number;
  /** Lost step executions that will not run again: retries spent or not safe to retry. */
  notRecovered: number;
  /** Runs paused for an operator because a lost action is not safe to retry and left no receipt. */
  pausedForOperator: number;
  statesFixed: number;
  /** Gates past their SLA: escalated, still waiting. */
  approvalsEscalated: number;
  /** Gates past their hard limit: expired, their step fails. */
  approvalsExpired: number;
  /** Runs that should be moving whose log has been silent for longer than their longest step timeout. */
  stuckRuns: number;
  /** Fan-out units whose waiting targets were released again after a crash stalled them. */
  releasesRepaired: number;
  /** Pending step executions whose command was sent again after a crash lost it. */
  commandsResent: number;
  /** Runs whose staged events a writer left unsequenced (it died in between): now in the chain. */
  inboxesSequenced: number;
}

export const emptySummary = (): ReconcileSummary => ({
  deadWorkers: 0,
  leasesExpired: 0,
  recovered: 0,
  notRecovered: 0,
  pausedForOperator: 0,
  statesFixed: 0,
  approvalsEscalated: 0,
  approvalsExpired: 0,
  stuckRuns: 0,
  releasesRepaired: 0,
  commandsResent: 0,
  inboxesSequenced: 0,
});

/** Quiet runs one sweep looks at; past them, the next sweep goes on after the last. */
const RUNS_PER_SWEEP = 100;

/** How long a run must have been quiet before its execution and aggregates are checked for drift. */
const QUIET_MS = 60_000;
/** How long a staged event may wait for its writer to sequence it before the sweep does. */
const INBOX_GRACE_MS = 5_000;

/**
 * The reconciler (seed 002, "Reconciliation Loop"), run on a schedule: declares silent workers
 * dead, ends the step executions whose lease expired and resumes their runs (the planner gives
 * them a new attempt when the step may retry), and repairs drift: a run whose interpreter
 * execution ended early, a worker shown busy with no lease, an aggregate that should have
 * completed, a fan-out whose next targets were never released, a command never sent. Every repair is a conditional write, so two reconcilers never repair twice.
 */
export function makeReconcile(deps: ReconcilerDeps) {
  const { runs, clock } = deps;

  const recover = makeRecoverLost(deps);
  const repairStalled = makeRepairStalled({ ...deps, fanout: makeFanout(deps) });

  /** Ends one lost execution by the rule every finder applies, and resumes its run. */
  async function recoverLost(lost: StepExecution, now: Date, summary: ReconcileSummary): Promise<void> {
    const record = await runs.load(lost.runId);
    if (!record) return;
    const runbook = await runbookOf(deps.runbooks, record.run);
    const step = allSteps(runbook).find((s) => s.step.id === lost.stepId)?.step;
    const body = lost.kind === 'rollback' ? step?.rollback : step;
    const verdict = await recover(lost, body, now);
    if (!verdict) return;
    summary.leasesExpired++;
    if (verdict.kind === 'pause') summary.pausedForOperator++;
    else if (verdict.kind === 'receipt' || (lost.kind === 'step' && step && lost.attempt <= step.retries))
      summary.recovered++;
    else summary.notRecovered++;
    deps.log('lease expired', {
      runId: lost.runId,
      executionId: lost.executionId,
      owner: lost.leaseOwner,
      verdict: verdict.kind,
    });
  }

  /** Where the next sweep goes on in the active runs, when the last one stopped at a full page. */
  let resumeAfter: Pick<Run, 'createdAt' | 'runId'> | undefined;

  /** A quiet run: one admission holds is admission's; any other is checked for drift. */
  async function checkQuietRun(record: RunRecord, now: Date, summary: ReconcileSummary): Promise<void> {
    const { runId } = record.run;
    // Admission holds these: their interpreter starts when admission lets them go, never here.
    if (record.run.status === 'throttled') return;
    if (waitsBeforeAdmission(record.run)) {
      // The word that the run ahead ended may have been lost: admission looks again.
      const outcome = await deps.settleWaiting?.(runId);
      if (outcome !== 'started') {
        if (outcome === 'failed') deps.log('waiting run failed on its dependencies', { runId });
        return;
      }
      deps.log('waiting run settled', { runId });
    }
    await countIfStuck(record, now, summary);
    // Only a restart stores its execution; the first one is named for the run.
    await checkRun(runId, record.executionArn ?? deps.interpreter.executionArnOf(runId), now, summary);
  }

  /** Checks a quiet, unfinished run: its interpreter execution still runs, its aggregates completed. */
  async function checkRun(runId: string, executionArn: string, now: Date, summary: ReconcileSummary) {
    const record = await runs.load(runId);
    // Admission may have held the run since the sweep listed it: only admission starts it then.
    if (!record || heldByAdmission(record.run)) return;
    const status = await deps.interpreter.status(executionArn);
    if (status !== 'RUNNING') {
      const arn = await deps.interpreter.restart(record.run, now);
      await runs.mutate(runId, () => ({ events: [], executionArn: arn }));
      summary.statesFixed++;
      deps.log('interpreter restarted', { runId, previous: executionArn, status });
      return;
    }
    const aggregates = await runs.aggregates(runId);
    for (const aggregate of aggregates) {
      if (aggregate.completed || aggregate.done < aggregate.total) continue;
      if (await claimAndResume({ runs, callbacks: deps.callbacks }, { runId, ...aggregate })) {
        summary.statesFixed++;
        deps.log('completed aggregate resumed', { runId, stepId: aggregate.stepId, attempt: aggregate.attempt });
      }
    }
    const [last] = record.head.seq > 0 ? await runs.events(runId, record.head.seq - 1, 1) : [];
    await resumeLostResume(record, aggregates, last, now, summary);
    const repaired = await repairStalled(record, aggregates, last, now);
    summary.releasesRepaired += repaired.releases;
    summary.commandsResent += repaired.resent;
  }

  /** Counts a quiet run as stuck when its last event is older than its longest step timeout. */
  async function countIfStuck(record: { run: Run; head: { seq: number } }, now: Date, summary: ReconcileSummary) {
    const { run, head } = record;
    if (head.seq === 0) return;
    const [[last], runbook] = await Promise.all([
      runs.events(run.runId, head.seq - 1, 1),
      runbookOf(deps.runbooks, run),
    ]);
    if (last && isStuck(run.status, new Date(last.timestamp), runbook, now)) {
      summary.stuckRuns++;
      deps.log('run stuck', { runId: run.runId, status: run.status, lastEventAt: last.timestamp });
    }
  }

  /**
   * A step completion that was claimed but whose resume never reached the interpreter: its finder
   * (a worker, a recovery) died between the claim and the callback. The interpreter still waits on
   * the step and nothing happened since the result that completed it, so that result is the run's
   * last event, quiet for a minute. Resuming again is safe: a token already used is gone, and the
   * adapter ignores it.
   */
  async function resumeLostResume(
    record: { run: Run; head: { seq: number } },
    aggregates: Awaited<ReturnType<RunStore['aggregates']>>,
    last: RunEvent | undefined,
    now: Date,
    summary: ReconcileSummary,
  ): Promise<void> {
    const runId = record.run.runId;
    if (!last || (last.type !== 'step.succeeded' && last.type !== 'step.failed')) return;
    if (Date.parse(last.timestamp) > now.getTime() - QUIET_MS) return;
    const { kind, attempt } = last.payload;
    const aggregate = aggregates.find(
      (a) => a.completed && a.kind === kind && a.stepId === last.stepId && a.attempt === attempt,
    );
    if (!aggregate) return;
    await deps.callbacks.succeed(aggregate.taskToken, completionOutput({ runId, ...aggregate }, aggregate));
    summary.statesFixed++;
    deps.log('lost resume sent again', { runId, stepId: aggregate.stepId, attempt: aggregate.attempt });
  }

  const applyDue = makeApplyDue(deps);

  /** Gates past their SLA escalate; past their hard limit they expire and the waiting run moves on. */
  async function sweepApprovals(now: Date, summary: ReconcileSummary): Promise<void> {
    for (const { runId, approvalId } of await deps.approvals.due(now)) {
      const [record, approval] = await Promise.all([runs.load(runId), deps.approvals.get(runId, approvalId)]);
      if (!record || !approval) continue;
      const applied = await applyDue(record.run, approval, now);
      if (applied === 'escalate') summary.approvalsEscalated++;
      if (applied === 'expire') {
        summary.approvalsExpired++;
        await wake(deps, runId, 'approval', { approvalId, status: 'expired' });
      }
      if (applied) deps.log(`approval ${applied === 'escalate' ? 'escalated' : 'expired'}`, { runId, approvalId });
    }
  }

  return async function reconcile(): Promise<ReconcileSummary> {
    const now = clock.now();
    const summary = emptySummary();
    await sweepApprovals(now, summary);

    const workers = await deps.workers.list();
    for (const worker of workers) {
      if (!isSilent(worker, now, deps.heartbeatMs)) continue;
      if (await deps.workers.setStatus(worker.workerId, 'dead', worker)) {
        summary.deadWorkers++;
        deps.log('worker declared dead', { workerId: worker.workerId, lastHeartbeatAt: worker.lastHeartbeatAt });
      }
    }

    // Before recovering lost executions, so a lost target's end follows what it staged.
    for (const runId of await runs.stalledInboxes(new Date(now.getTime() - INBOX_GRACE_MS))) {
      await runs.sequence(runId);
      summary.inboxesSequenced++;
      deps.log('staged events sequenced', { runId });
    }

    for (const { runId, executionId } of await runs.expiredLeases(now)) {
      const lost = await runs.execution(runId, executionId);
      if (!lost || stepExecutionStateMachine.isTerminal(lost.status)) continue;
      await recoverLost(lost, now, summary);
    }

    // A worker shown busy with an execution it no longer holds.
    for (const worker of workers) {
      if (worker.status !== 'busy' || !worker.currentExecutionId) continue;
      const runId = worker.currentExecutionId.split('.')[0] ?? '';
      const execution = await runs.execution(runId, worker.currentExecutionId);
      const holds =
        execution &&
        !stepExecutionStateMachine.isTerminal(execution.status) &&
        execution.leaseOwner === worker.workerId &&
        Date.parse(execution.leaseExpiresAt ?? '') > now.getTime();
      if (!holds && (await deps.workers.clearCurrent(worker.workerId, worker.currentExecutionId))) {
        summary.statesFixed++;
        deps.log('busy worker without a lease set idle', { workerId: worker.workerId });
      }
    }

    const quiet = await runs.activeRuns(new Date(now.getTime() - QUIET_MS), RUNS_PER_SWEEP, resumeAfter);
    // Past a full page, the next sweep goes on after the last run this one looked at.
    const last = quiet.at(-1)?.run;
    resumeAfter =
      quiet.length === RUNS_PER_SWEEP && last ? { createdAt: last.createdAt, runId: last.runId } : undefined;
    // The admitter visits noted tenants only: one note each per sweep, however many runs it holds.
    const noted = new Set<string>();
    for (const record of quiet) {
      if (Date.parse(record.run.updatedAt) > now.getTime() - QUIET_MS) continue;
      const { tenantId, status } = record.run;
      if (status === 'throttled' && deps.noteBacklog && !noted.has(tenantId)) {
        noted.add(tenantId);
        try {
          await deps.noteBacklog(tenantId);
        } catch (error) {
          deps.log('backlog not noted', { tenantId, error: (error as Error).message });
        }
      }
      // One run that cannot be repaired now must not keep the sweep from the others.
      try {
        await checkQuietRun(record, now, summary);
      } catch (error) {
        deps.log('quiet run not checked', { runId: record.run.runId, error: (error as Error).message });
      }
    }
    return summary;
  };
}

export type Reconcile = ReturnType<typeof makeReconcile>;

import type { ApprovalStore } from './ports/approvals.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import type { CarriedRun, RunRecord, RunSnapshot, RunStore } from './ports/runs.js';
import { writes } from './ports/writes.js';
import { StaleWriteError } from '../domain/errors.js';
import { dueTransition, isOpen, requestApproval } from '../domain/approvals.js';
import type { Approval, Run, StepExecution } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import { proposedAction, terminalDecision } from '../domain/plan-outcomes.js';
import { hasFanout, plan, type PlanDecision } from '../domain/planner.js';
import { approvalDeadlines, DEFAULT_POLICY, policyMayGate, type PolicyDocument } from '../domain/policy.js';
import { runStateMachine, type RunStatus } from '../domain/statuses.js';
import { makeApplyDue } from './approval-timer.js';
import type { ApprovalAlerts, Clock, RunbookStore } from './ports.js';
import { runbookOf } from './runs.js';
import { draft } from './drafts.js';
import { startingWith } from './run-start.js';
import { carriedOf } from './carried.js';
import { CANCELLED_UNSENT, endUnsent } from './unsent.js';

export interface InterpreterDeps {
  readonly runbooks: RunbookStore;
  readonly runs: RunStore;
  readonly clock: Clock;
  /** Told of each step refused because its sandbox profile does not allow the action (a metric). */
  readonly onViolation?: (violation: { runId: string; stepId: string; action: string; profile: string }) => void;
}

/** What Plan needs besides: the policy every first dispatch goes through, and the run's gates. */
export interface PlanDeps extends InterpreterDeps {
  readonly approvals: ApprovalStore;
  /** Resumes the Dispatch task of a step whose unsent executions a cancel ends. */
  readonly callbacks: TaskCallbacks;
  /** The deployment's policy, or the error it failed to load with (every step is then denied). */
  readonly policy: PolicyDocument | Error;
  /** Posts approval requests and escalations; never throws. */
  readonly alerts?: ApprovalAlerts;
}

/** The run status and events that go with a decision, for a run currently in `from`. */
function transitionFor(run: Run, decision: PlanDecision, now: string): { status: RunStatus; events: EventDraft[] } {
  switch (decision.action) {
    case 'succeed':
      return { status: 'succeeded', events: [draft('run.succeeded', now, {})] };
    case 'cancelled':
      return { status: 'cancelled', events: [draft('run.cancelled', now, {})] };
    case 'fail': {
      const events: EventDraft[] = [];
      if (decision.rolledBack.length > 0) events.push(draft('rollback.completed', now, { steps: decision.rolledBack }));
      events.push(draft('run.failed', now, { error: decision.error }));
      return { status: 'failed', events };
    }
    case 'dispatch':
      if (decision.kind === 'rollback' && run.status !== 'rolling_back')
        return { status: 'rolling_back', events: [draft('rollback.started', now, { reason: 'step failed' })] };
      return {
        // A step after a rollback (an `always` or `on_failure` step, or the next one under continue) runs.
        status: ['queued', 'waiting_for_approval', 'rolling_back'].includes(run.status) ? 'running' : run.status,
        events: [],
      };
    case 'await_approval':
      return { status: 'waiting_for_approval', events: [] };
    case 'wait':
      return { status: run.status === 'queued' ? 'running' : run.status, events: [] };
    case 'pause':
      return { status: run.status, events: [] };
  }
}

/** Plan's decision and, for a step to dispatch, the run as Plan found or left it, to travel with it. */
export interface Planned {
  readonly decision: PlanDecision;
  readonly carried?: CarriedRun;
}

/**
 * Plan: decides the next action from the stored run and records what the decision changes
 * (status and its event) in one transaction. Deciding the same state twice records nothing new.
 */
export function makePlanNext(deps: PlanDeps) {
  const plan = makePlan(deps);
  return async (runId: string, faults?: TaskFaults): Promise<PlanDecision> => (await plan(runId, faults)).decision;
}

/**
 * Plan, with the run carried along when the decision is a dispatch: the record Plan decided on
 * (or wrote) is the one Dispatch would read next, so it travels in the interpreter's state and
 * Dispatch acts on it without a read. A run changed in between refuses Dispatch's write, and
 * Dispatch then reads it as it is.
 *
 * `given` is the run as its creation stored it, carried to the execution's first Plan: that Plan
 * decides on it without a read. Every write that follows from it is chained on its head and
 * revision, so a run changed since (a cancel that came in first) is refused and read again.
 */
export function makePlan(deps: PlanDeps) {
  const planNext = makeDecide(deps);
  return async function planned(runId: string, faults?: TaskFaults, given?: CarriedRun): Promise<Planned> {
    const { decision, record } = await planNext(runId, faults, given);
    if (decision.action !== 'dispatch' || !record) return { decision };
    const carried = carriedOf(deps.runs, record);
    return carried ? { decision, carried } : { decision };
  };
}

/** The decision and the record it was made on (or the one its write left). */
function makeDecide(deps: PlanDeps) {
  const applyDue = makeApplyDue(deps);

  return async function planNext(
    runId: string,
    faults?: TaskFaults,
    given?: CarriedRun,
  ): Promise<{ decision: PlanDecision; record?: RunRecord }> {
    let decision: PlanDecision | undefined;
    // The run and its executions in one read, or the run its creation carried (which has none).
    const first: { record: RunRecord; executions?: StepExecution[] } | undefined =
      given && given.record.run.runId === runId ? { record: deps.runs.hold(given) } : await deps.runs.snapshot(runId);
    if (!first) throw new Error(`run ${runId} does not exist`);
    const loaded = first.record;
    // The first pass decides on this read unless something changed the run since.
    let held: RunRecord | undefined = loaded;
    if (!runStateMachine.isTerminal(loaded.run.status)) {
      // Cancel wins over anything in flight that no worker holds yet.
      if (loaded.run.cancelRequested) {
        await endUnsent(deps, runId, () => CANCELLED_UNSENT);
        held = undefined;
      }
      if ((faults?.count ?? 0) >= MAX_TASK_FAULTS) return { decision: await failForFaults(deps, runId, faults) };
    }
    const runbook = await runbookOf(deps.runbooks, loaded.run);
    // A run the policy cannot gate has no approvals (one already waiting on a gate is still looked up).
    const gated = loaded.run.status === 'waiting_for_approval' || policyMayGate(deps.policy, runbook);
    const fanout = hasFanout(runbook);
    // A fan-out unit's Dispatch reads the run itself, so a run with one carries nothing.
    const carriable = (record: RunRecord) => (fanout ? undefined : record);
    /**
     * The run as held, with `executions` (read now when they were not read with it); or, with
     * nothing held, the run and its executions read afresh.
     */
    const snapshotOf = async (
      record: RunRecord | undefined,
      executions: StepExecution[] | undefined,
    ): Promise<RunSnapshot | undefined> =>
      record ? { record, executions: executions ?? (await deps.runs.executions(runId)) } : deps.runs.snapshot(runId);
    // Each pass reads the run and its executions afresh and commits only against that same state.
    for (let attempt = 0; attempt < 10; attempt++) {
      // A run that has not started has no executions, approvals or aggregates: each follows a
      // decision that starts the run, which moves its head and so refuses this pass's commit.
      const unstarted = held?.run.status === 'queued';
      const [read, listed, aggregates] = await Promise.all([
        snapshotOf(held, unstarted ? [] : first.executions),
        gated && !unstarted ? deps.approvals.list(runId) : undefined,
        fanout && !unstarted ? deps.runs.aggregates(runId) : [],
      ]);
      held = undefined;
      if (!read) throw new Error(`run ${runId} does not exist`);
      const { record, executions } = read;
      // A run found waiting on a gate has its gates looked up, whatever the first record said.
      const approvals =
        listed ?? (record.run.status === 'waiting_for_approval' ? await deps.approvals.list(runId) : []);
      const now = deps.clock.now();
      const { run } = record;
      if (runStateMachine.isTerminal(run.status)) return { decision: terminalDecision(run) };
      const due = approvals.find((a) => dueTransition(a, now) !== undefined);
      if (due) {
        await applyDue(run, due, now);
        continue;
      }
      decision = plan({
        runbook,
        run: { ...run, rollbackRequested: record.rollbackRequested },
        executions,
        now,
        policy: deps.policy,
        approvals,
        aggregates,
      });
      // A queued run starts with its first step's dispatch, in Dispatch's own write (`startingWith`).
      if (run.status === 'queued' && decision.action === 'dispatch') return { decision, record: carriable(record) };
      const nowIso = now.toISOString();
      const change = transitionFor(run, decision, nowIso);
      const gate = decision.action === 'await_approval' ? decision : undefined;
      const created =
        gate && !approvals.some((a) => a.approvalId === gate.approvalId)
          ? requestApproval({
              gate,
              round: gate.round,
              run,
              stepId: gate.stepId,
              proposedAction: proposedAction(runbook, gate.stepId),
              rule: gate.rule,
              reason: gate.reason,
              now,
              ...approvalDeadlines(deps.policy instanceof Error ? DEFAULT_POLICY : deps.policy, runbook.environment),
            })
          : undefined;
      if (created) change.events.push(...gateEvents(created, nowIso));
      // A gate the run no longer waits on (it was cancelled or is rolling back) is withdrawn, so
      // nobody is asked or escalated to about it.
      const withdrawn = approvals
        .filter((a) => isOpen(a.status) && a.approvalId !== gate?.approvalId)
        .map((a) => ({ was: a, now: { ...a, status: 'cancelled' as const, resolvedAt: nowIso } }));
      change.events.unshift(
        ...withdrawn.map((w) =>
          draft(
            'approval.resolved',
            nowIso,
            { approvalId: w.was.approvalId, status: 'cancelled' },
            { stepId: w.was.stepId },
          ),
        ),
      );
      if (change.status === run.status && run.status !== 'queued' && change.events.length === 0)
        return { decision, record: carriable(record) };
      // From queued, the run starts first; the decision's own transition follows.
      if (change.status !== run.status && run.status !== 'queued')
        runStateMachine.transition(run.status, change.status);
      const committed = await deps.runs
        .mutate(
          runId,
          (current) =>
            current.head.seq !== record.head.seq
              ? undefined
              : startingWith(
                  run,
                  {
                    run: {
                      status: change.status,
                      updatedAt: nowIso,
                      ...(runStateMachine.isTerminal(change.status) && { endedAt: nowIso }),
                      ...(decision?.action === 'fail' && { error: decision.error }),
                      ...((decision?.action === 'dispatch' || decision?.action === 'await_approval') && {
                        currentStepId: decision.stepId,
                      }),
                    },
                    events: change.events,
                    writes: [
                      ...(created ? [writes.putApproval(created)] : []),
                      ...withdrawn.map((w) => writes.updateApproval(w.now, w.was)),
                    ],
                  },
                  nowIso,
                ),
          record,
        )
        .catch((error: unknown) => {
          // A gate was created or decided concurrently: decide again.
          if (error instanceof StaleWriteError) return undefined;
          throw error;
        });
      if (committed) {
        if (created) await deps.alerts?.requested(created, committed.record.run);
        return { decision, record: carriable(committed.record) };
      }
      // Someone changed the run while we decided (a cancel, a result): decide again.
    }
    throw new Error(`could not plan run ${runId}: it keeps changing`);
  };
}

/** Faults of the interpreter's waiting tasks in a row (the state machine counts them). */
export interface TaskFaults {
  readonly count: number;
  readonly last?: { readonly Error?: string; readonly Cause?: string };
}

/** Faults in a row after which Plan fails the run instead of trying again (about a minute of back-off). */
export const MAX_TASK_FAULTS = 6;

/**
 * Ends a run whose waiting tasks keep failing without progress (a fault dispatch cannot turn into
 * a step failure), so the interpreter never loops: unsent executions fail and the run fails with
 * DISPATCH_LOOP and the last fault, in the same transaction as `run.failed`.
 */
async function failForFaults(deps: PlanDeps, runId: string, faults: TaskFaults | undefined): Promise<PlanDecision> {
  const last = faults?.last;
  const detail = last ? `${last.Error ?? 'Error'}: ${last.Cause ?? ''}`.slice(0, 500) : 'unknown';
  const error = {
    code: 'DISPATCH_LOOP',
    message: `the interpreter's tasks failed ${faults?.count ?? 0} times in a row without progress; last: ${detail}`,
  };
  await endUnsent(deps, runId, () => ({ status: 'failed', error: { ...error, retryable: false } }));
  const now = deps.clock.now().toISOString();
  const result = await deps.runs.mutate(runId, ({ run }) => {
    if (runStateMachine.isTerminal(run.status)) return undefined;
    runStateMachine.transition(run.status, 'failed');
    return {
      run: { status: 'failed', error, endedAt: now, updatedAt: now },
      events: [draft('run.failed', now, { error })],
    };
  });
  const ended = result?.record.run ?? (await deps.runs.load(runId))?.run;
  return ended ? terminalDecision(ended) : { action: 'fail', error, rolledBack: [] };
}

/** The events that record a new gate: the policy's decision and the request. */
function gateEvents(approval: Approval, now: string): EventDraft[] {
  const about = { stepId: approval.stepId };
  return [
    draft(
      'policy.decided',
      now,
      {
        outcome: 'needs_approval',
        rule: approval.rule,
        reason: approval.reason,
        approvalId: approval.approvalId,
      },
      about,
    ),
    draft(
      'approval.requested',
      now,
      {
        approvalId: approval.approvalId,
        scope: approval.scope,
        scopeId: approval.scopeId,
        round: approval.round,
        proposedAction: approval.proposedAction,
        requiredApprovals: approval.requiredApprovals,
        blastRadius: approval.blastRadius,
        rule: approval.rule,
        reason: approval.reason,
        slaDeadline: approval.slaDeadline,
        hardDeadline: approval.hardDeadline,
      },
      about,
    ),
  ];
}

import type { ApprovalStore } from './ports/approvals.js';
import type { RunRecord, RunStore } from './ports/runs.js';
import { StaleWriteError } from '../domain/errors.js';
import { writes } from './ports/writes.js';
import { autoApprove, dueTransition, isOpen, requestApproval } from '../domain/approvals.js';
import { makeApplyDue } from './approval-timer.js';
import type { Json } from '../domain/canonical.js';
import { durationMs } from '../domain/duration.js';
import type { Approval, ErrorInfo, Run, StepExecution } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import type { Aggregate } from '../domain/step-records.js';
import type { StepCommand } from '../domain/messages.js';
import { plan, type PlanDecision } from '../domain/planner.js';
import { approvalDeadlines, DEFAULT_POLICY, policyMayGate, type PolicyDocument } from '../domain/policy.js';
import { allSteps, type Runbook, type Step } from '../domain/runbook.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../domain/sandbox-profiles.js';
import { runStateMachine, type RunStatus } from '../domain/statuses.js';
import { substitute } from '../domain/template.js';
import type { ApprovalAlerts, Clock, RunbookStore } from './ports.js';
import { runbookOf } from './runs.js';
import { draft } from './drafts.js';
import { CANCELLED_UNSENT, endUnsent } from './unsent.js';

/** A command the queue refused for good: sending it again cannot succeed. */
export interface RejectedCommand {
  readonly executionId: string;
  readonly code: string;
  readonly message: string;
}

/** Sends step commands to a sandbox profile's queue. */
export interface CommandQueue {
  /**
   * Resolves the commands the queue refused for good (too large, contents it cannot carry);
   * throws when the queue stays unavailable, so the interpreter tries again after a back-off.
   */
  send(profile: SandboxProfileName, commands: readonly StepCommand[]): Promise<readonly RejectedCommand[]>;
}

/** Resumes a waiting interpreter task. */
export interface TaskCallbacks {
  succeed(taskToken: string, output: Record<string, Json>): Promise<void>;
  fail(taskToken: string, error: string, cause: string): Promise<void>;
}

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

export interface DispatchDeps extends InterpreterDeps {
  readonly approvals: ApprovalStore;
  readonly queue: CommandQueue;
  readonly callbacks: TaskCallbacks;
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

/**
 * Plan: decides the next action from the stored run and records what the decision changes
 * (status and its event) in one transaction. Deciding the same state twice records nothing new.
 */
export function makePlanNext(deps: PlanDeps) {
  const applyDue = makeApplyDue(deps);

  return async function planNext(runId: string, faults?: TaskFaults): Promise<PlanDecision> {
    let decision: PlanDecision | undefined;
    const loaded = await deps.runs.load(runId);
    if (!loaded) throw new Error(`run ${runId} does not exist`);
    // The first pass decides on this read unless something changed the run since.
    let held: RunRecord | undefined = loaded;
    if (!runStateMachine.isTerminal(loaded.run.status)) {
      // Cancel wins over anything in flight that no worker holds yet.
      if (loaded.run.cancelRequested) {
        await endUnsent(deps, runId, () => CANCELLED_UNSENT);
        held = undefined;
      }
      if ((faults?.count ?? 0) >= MAX_TASK_FAULTS) return failForFaults(deps, runId, faults);
    }
    const runbook = await runbookOf(deps.runbooks, loaded.run);
    // A run the policy cannot gate has no approvals (one already waiting on a gate is still looked up).
    const gated = loaded.run.status === 'waiting_for_approval' || policyMayGate(deps.policy, runbook);
    // Each pass reads the run and its executions afresh and commits only against that same state.
    for (let attempt = 0; attempt < 10; attempt++) {
      const [record, executions, approvals] = await Promise.all([
        held ?? deps.runs.load(runId),
        deps.runs.executions(runId),
        gated ? deps.approvals.list(runId) : [],
      ]);
      held = undefined;
      if (!record) throw new Error(`run ${runId} does not exist`);
      const now = deps.clock.now();
      const { run } = record;
      if (runStateMachine.isTerminal(run.status)) return terminalDecision(run);
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
      });
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
      const startEvents = run.status === 'queued' ? [draft('run.started', nowIso, {})] : [];
      if (change.status === run.status && startEvents.length === 0 && change.events.length === 0) return decision;
      // From queued, the run starts first; the decision's own transition follows.
      if (change.status !== run.status && run.status !== 'queued')
        runStateMachine.transition(run.status, change.status);
      const committed = await deps.runs
        .mutate(
          runId,
          (current) =>
            current.head.seq !== record.head.seq
              ? undefined
              : {
                  run: {
                    status: change.status,
                    updatedAt: nowIso,
                    ...(run.status === 'queued' && { startedAt: nowIso }),
                    ...(runStateMachine.isTerminal(change.status) && { endedAt: nowIso }),
                    ...(decision?.action === 'fail' && { error: decision.error }),
                    ...((decision?.action === 'dispatch' || decision?.action === 'await_approval') && {
                      currentStepId: decision.stepId,
                    }),
                  },
                  events: [...startEvents, ...change.events],
                  writes: [
                    ...(created ? [writes.putApproval(created)] : []),
                    ...withdrawn.map((w) => writes.updateApproval(w.now, w.was)),
                  ],
                },
          record,
        )
        .catch((error: unknown) => {
          // A gate was created or decided concurrently: decide again.
          if (error instanceof StaleWriteError) return undefined;
          throw error;
        });
      if (committed) {
        if (created) await deps.alerts?.requested(created, committed.record.run);
        return decision;
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

/** `backend.action` of a step, for people reading an approval. */
function proposedAction(runbook: Runbook, stepId: string): string {
  const step = allSteps(runbook).find((s) => s.step.id === stepId)?.step;
  return step ? `${step.backend}.${step.action}` : 'unknown';
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

function terminalDecision(run: Run): PlanDecision {
  if (run.status === 'succeeded') return { action: 'succeed' };
  if (run.status === 'cancelled') return { action: 'cancelled' };
  return {
    action: 'fail',
    error: { code: run.error?.code ?? 'FAILED', message: run.error?.message ?? 'the run failed' },
    rolledBack: [],
  };
}

/** The command for one step (or its rollback) on one target, with the run's inputs substituted. */
export function commandFor(runbook: Runbook, run: Run, step: Step, execution: StepExecution): StepCommand {
  const body = execution.kind === 'rollback' && step.rollback ? step.rollback : step;
  const params = substitute(body.params as Json, run.inputs) as Record<string, Json>;
  return {
    v: 1,
    executionId: execution.executionId,
    runId: run.runId,
    tenantId: run.tenantId,
    stepId: step.id,
    kind: execution.kind,
    targetId: execution.targetId,
    attempt: execution.attempt,
    idempotencyKey: execution.idempotencyKey,
    backend: body.backend,
    action: body.action,
    params,
    timeoutMs: durationMs(body.timeout ?? step.timeout),
    secrets: body.secrets,
    sandboxProfile: runbook.sandbox_profile,
    correlationId: run.runId,
  };
}

/** The targets of a step; target resolution against the inventory comes with fan-out. */
function targetsOf(step: Step): string[] {
  return step.target
    ? ['node' in step.target ? step.target.node : 'group' in step.target ? step.target.group : 'all']
    : ['once'];
}

/**
 * Dispatch: writes the step executions and the step's aggregate with `step.dispatched` in one
 * transaction, then sends the commands. Dispatching the same attempt again (a Lambda retry, or
 * the interpreter resumed after a restart) re-attaches: the aggregate gets the new task token,
 * unfinished commands are sent again (workers' leases make that harmless), and an aggregate that
 * already completed resumes the execution at once.
 */
export function makeDispatch(deps: DispatchDeps) {
  /**
   * Records a step that may not run as failed for good, and resumes: denied by the policy (with
   * `policy.decided`), or not allowed by the sandbox profile (with `sandbox.violation` too).
   */
  async function refuse(
    stepId: string,
    kind: 'step' | 'rollback',
    attempt: number,
    executions: readonly StepExecution[],
    body: { backend: string; action: string },
    profile: SandboxProfileName,
    verdict: { rule: string; reason: string; viaPolicy: boolean },
    now: string,
    taskToken: string,
  ): Promise<boolean> {
    const runId = executions[0]?.runId ?? '';
    const { rule, reason } = verdict;
    const violation = rule === 'sandbox-profile';
    const code = violation ? 'SANDBOX_VIOLATION' : rule === 'approval-expired' ? 'APPROVAL_EXPIRED' : 'POLICY_DENIED';
    const error = { code, message: reason, retryable: false };
    try {
      await deps.runs.mutate(runId, () => ({
        run: { currentStepId: stepId, updatedAt: now },
        events: [
          ...(verdict.viaPolicy ? [draft('policy.decided', now, { outcome: 'deny', rule, reason }, { stepId })] : []),
          ...(violation
            ? [
                draft(
                  'sandbox.violation',
                  now,
                  {
                    backend: body.backend,
                    action: body.action,
                    sandboxProfile: profile,
                    enforcedBy: 'dispatcher',
                    reason,
                  },
                  { stepId, meta: { sandboxProfile: profile } },
                ),
              ]
            : []),
          draft('step.failed', now, { kind, attempt, outcome: 'failed', error }, { stepId }),
        ],
        writes: [
          ...executions.map((e) => writes.putExecution({ ...e, status: 'failed', endedAt: now, error })),
          writes.putAggregate(runId, {
            kind,
            stepId,
            attempt,
            total: executions.length,
            done: executions.length,
            succeeded: 0,
            failed: executions.length,
            completed: true,
            taskToken,
          }),
        ],
      }));
    } catch (err) {
      // Written already by an earlier delivery of this task: the caller re-attaches to it.
      if (err instanceof StaleWriteError) return false;
      throw err;
    }
    if (violation) deps.onViolation?.({ runId, stepId, action: `${body.backend}.${body.action}`, profile });
    await deps.callbacks.succeed(taskToken, { stepId, kind, attempt, refused: true });
    return true;
  }

  return async function dispatch(
    runId: string,
    decision: Extract<PlanDecision, { action: 'dispatch' }>,
    taskToken: string,
  ): Promise<void> {
    const record = await deps.runs.load(runId);
    if (!record) throw new Error(`run ${runId} does not exist`);
    const runbook = await runbookOf(deps.runbooks, record.run);
    const step = allSteps(runbook).find((s) => s.step.id === decision.stepId)?.step;
    if (!step) throw new Error(`run ${runId} has no step ${decision.stepId}`);
    const { kind, attempt } = decision;
    const now = deps.clock.now().toISOString();

    const cancelled = record.run.cancelRequested;
    // Writing first is the common case; only a cancel needs to know beforehand what was written.
    const existing = cancelled ? await deps.runs.aggregate(runId, kind, step.id, attempt) : undefined;
    // Cancelled before this attempt was written: nothing to send, Plan ends the run.
    if (!existing && cancelled) {
      await deps.callbacks.succeed(taskToken, { stepId: step.id, kind, attempt, cancelled: true });
      return;
    }
    let fresh: { aggregate: Aggregate; executions: readonly StepExecution[] } | undefined;
    let writtenEarlier = false;
    if (!existing) {
      const targets = targetsOf(step);
      const executions: StepExecution[] = targets.map((targetId) => ({
        executionId: `${runId}.${kind}.${step.id}.${attempt}.${targetId}`,
        runId,
        tenantId: record.run.tenantId,
        stepId: step.id,
        kind,
        targetId,
        attempt,
        status: 'pending',
        // Stable across attempts: a receipt written by an attempt that succeeded is found by the next.
        idempotencyKey: `${runId}.${kind}.${step.id}.${targetId}`,
        createdAt: now,
        outputTail: [],
        secretsUsed: [],
      }));
      const body = kind === 'rollback' && step.rollback ? step.rollback : step;
      const profile = runbook.sandbox_profile;
      // Refused before anything is queued: the step fails for good and the run goes on from there.
      const { policy } = decision;
      const refusal =
        policy?.outcome === 'deny'
          ? { ...policy, viaPolicy: true }
          : !profileAllows(SANDBOX_PROFILES[profile], body.backend, body.action)
            ? {
                rule: 'sandbox-profile',
                reason: `${body.backend}.${body.action} is not allowed by sandbox profile ${profile}`,
                viaPolicy: false,
              }
            : undefined;
      if (refusal) {
        if (await refuse(step.id, kind, attempt, executions, body, profile, refusal, now, taskToken)) return;
        writtenEarlier = true;
      }
      const auto = policy?.autoApproved;
      const approvedByPolicy =
        auto &&
        autoApprove(
          {
            gate: auto,
            round: auto.round,
            run: record.run,
            stepId: step.id,
            proposedAction: `${body.backend}.${body.action}`,
            rule: policy.rule,
            reason: policy.reason,
            now: deps.clock.now(),
            slaSeconds: 0,
            hardLimitSeconds: 0,
          },
          auto,
        );
      const written: Aggregate = {
        kind,
        stepId: step.id,
        attempt,
        total: executions.length,
        done: 0,
        succeeded: 0,
        failed: 0,
        completed: false,
        taskToken,
      };
      if (!writtenEarlier)
        try {
          await deps.runs.mutate(
            runId,
            () => ({
              run: { currentStepId: step.id, updatedAt: now },
              events: [
                ...(policy
                  ? [
                      draft(
                        'policy.decided',
                        now,
                        {
                          outcome: 'allow',
                          rule: policy.rule,
                          reason: policy.reason,
                          ...(policy.approvalId !== undefined && { approvalId: policy.approvalId }),
                        },
                        { stepId: step.id },
                      ),
                    ]
                  : []),
                ...(approvedByPolicy
                  ? [
                      draft(
                        'approval.resolved',
                        now,
                        {
                          approvalId: approvedByPolicy.approvalId,
                          status: 'approved',
                          byPolicy: true,
                          confidence: auto.confidence,
                          threshold: auto.threshold,
                        },
                        { stepId: step.id },
                      ),
                    ]
                  : []),
                draft(
                  'step.dispatched',
                  now,
                  {
                    kind,
                    attempt,
                    backend: body.backend,
                    action: body.action,
                    targets,
                  },
                  { stepId: step.id, meta: { sandboxProfile: runbook.sandbox_profile } },
                ),
              ],
              writes: [
                ...(approvedByPolicy ? [writes.putApproval(approvedByPolicy)] : []),
                ...executions.map((e) => writes.putExecution(e)),
                writes.putAggregate(runId, written),
              ],
            }),
            record,
          );
          fresh = { aggregate: written, executions };
        } catch (error) {
          // Another dispatch of the same attempt won: fall through to re-attach.
          if (!(error instanceof StaleWriteError)) throw error;
        }
    }
    // What this dispatch wrote needs no reading back; a re-attach reads what the first one wrote.
    const aggregate = fresh?.aggregate ?? existing ?? (await deps.runs.aggregate(runId, kind, step.id, attempt));
    if (!aggregate) throw new Error(`aggregate for ${step.id} attempt ${attempt} is missing`);
    if (!fresh) await deps.runs.setAggregateToken(runId, kind, step.id, attempt, taskToken);
    if (aggregate.completed) {
      await deps.callbacks.succeed(taskToken, { stepId: step.id, attempt, reattached: true });
      return;
    }
    const mine = (e: StepExecution) => e.stepId === step.id && e.kind === kind && e.attempt === attempt;
    // Cancelled since: what no worker holds ends now (resuming this task once nothing is left).
    if (cancelled) {
      await endUnsent(deps, runId, (e) => (mine(e) ? CANCELLED_UNSENT : undefined));
      return;
    }
    const executions = (fresh?.executions ?? (await deps.runs.executions(runId))).filter(
      (e) => mine(e) && ['pending', 'leased', 'running'].includes(e.status),
    );
    const failures = new Map<string, ErrorInfo>();
    const commands: StepCommand[] = [];
    for (const e of executions) {
      try {
        commands.push(commandFor(runbook, record.run, step, e));
      } catch (error) {
        failures.set(e.executionId, {
          code: 'PARAMS_INVALID',
          message: `the step's params could not be rendered: ${(error as Error).message}`,
          retryable: false,
        });
      }
    }
    const rejected = commands.length > 0 ? await deps.queue.send(runbook.sandbox_profile, commands) : [];
    for (const r of rejected)
      failures.set(r.executionId, {
        code: 'COMMAND_REJECTED',
        message: `the queue refused the step's command (${r.code}): ${r.message}`,
        retryable: false,
      });
    if (failures.size === 0) return;
    // A command no queue can carry fails its execution for good; sending it again cannot help.
    await endUnsent(deps, runId, (e) => {
      const error = failures.get(e.executionId);
      return error && { status: 'failed', error };
    });
  };
}

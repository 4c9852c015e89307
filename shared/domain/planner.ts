import { z } from 'zod';
import { durationMs } from './duration.js';
import { approvalIdFor, isOpen } from './approvals.js';
import type { Approval, ErrorInfo, Run } from './entities.js';
import { approvalDeadlines, decideUnit, type PolicyDocument } from './policy.js';
import { allSteps, blastRadiusSchema, type Phase, type Runbook, type Step } from './runbook.js';
import { type ExecutionView, type StepState, stepState, type UnitCount } from './step-state.js';
import { unitOf } from './fanout.js';

/** What the run interpreter does next; the Route choice state switches on `action`. */
export const planDecisionSchema = z.discriminatedUnion('action', [
  z.strictObject({
    action: z.literal('dispatch'),
    stepId: z.string(),
    kind: z.enum(['step', 'rollback']),
    attempt: z.number().int().positive(),
    /** What the policy decided for a step's first attempt; the dispatcher records it with the dispatch. */
    policy: z
      .strictObject({
        outcome: z.enum(['allow', 'deny']),
        rule: z.string(),
        reason: z.string(),
        /** The gate that allowed it, when one did. */
        approvalId: z.string().optional(),
        /** A gate approved by policy, to be recorded as such with the numbers. */
        autoApproved: z
          .strictObject({
            scope: z.enum(['step', 'phase', 'run']),
            scopeId: z.string(),
            round: z.number().int().positive(),
            requiredApprovals: z.number().int().positive(),
            blastRadius: blastRadiusSchema,
            confidence: z.number(),
            threshold: z.number(),
          })
          .optional(),
      })
      .optional(),
  }),
  /** The step's gate waits for people; the AwaitApproval task keeps its token on the approval. */
  z.strictObject({
    action: z.literal('await_approval'),
    stepId: z.string(),
    approvalId: z.string(),
    round: z.number().int().positive(),
    scope: z.enum(['step', 'phase', 'run']),
    scopeId: z.string(),
    requiredApprovals: z.number().int().positive(),
    blastRadius: blastRadiusSchema,
    rule: z.string(),
    reason: z.string(),
    /** Until the SLA (then the task times out and the gate escalates), or until the hard limit. */
    timeoutSeconds: z.number().int().min(1),
  }),
  z.strictObject({
    action: z.literal('wait'),
    stepId: z.string(),
    waitSeconds: z.number().int().min(1),
    reason: z.string(),
  }),
  z.strictObject({ action: z.literal('succeed') }),
  z.strictObject({
    action: z.literal('fail'),
    error: z.strictObject({ code: z.string(), message: z.string() }),
    rolledBack: z.array(z.string()),
  }),
  z.strictObject({ action: z.literal('cancelled') }),
  /** The run waits for an operator (`POST /v1/runs/{id}/resume`). */
  z.strictObject({ action: z.literal('pause'), reason: z.string() }),
]);
export type PlanDecision = z.infer<typeof planDecisionSchema>;

export interface PlanInput {
  readonly runbook: Runbook;
  readonly run: Pick<
    Run,
    'runId' | 'status' | 'cancelRequested' | 'startedAt' | 'createdAt' | 'error' | 'operatorRetry'
  > & {
    readonly rollbackRequested?: boolean;
  };
  readonly executions: readonly ExecutionView[];
  readonly now: Date;
  /**
   * The deployment's policy (or the error it failed to load with: every step is then denied).
   * Without it no step is gated.
   */
  readonly policy?: PolicyDocument | Error;
  /** The run's approval gates, every round. */
  readonly approvals?: readonly Pick<
    Approval,
    'approvalId' | 'scope' | 'scopeId' | 'round' | 'status' | 'slaDeadline' | 'hardDeadline'
  >[];
  /** The run's step aggregates: a fan-out unit is in flight until its aggregate completes. */
  readonly aggregates?: readonly UnitCount[];
}

/** Whether a step whose turn has come should run, given its condition and whether anything failed. */
function conditionHolds(step: Step, anyFailed: boolean): boolean {
  if (step.condition === 'always') return true;
  return step.condition === 'on_failure' ? anyFailed : !anyFailed;
}

/** Moves a step that is due (not started, or waiting for a retry) towards its next attempt. */
function advance(runId: string, step: Step, state: StepState, kind: 'step' | 'rollback', now: Date): PlanDecision {
  if (state.kind === 'in_flight') return { action: 'dispatch', stepId: step.id, kind, attempt: state.attempt };
  if (state.kind === 'retry') {
    const waitMs = state.after.getTime() - now.getTime();
    if (waitMs > 0)
      return {
        action: 'wait',
        stepId: step.id,
        waitSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
        reason: `attempt ${state.attempt} failed${state.error ? `: ${state.error.message}` : ''}; retrying`,
      };
    return { action: 'dispatch', stepId: step.id, kind, attempt: state.attempt + 1 };
  }
  return { action: 'dispatch', stepId: step.id, kind, attempt: 1 };
}

/**
 * The run interpreter's brain: from the stored run, its runbook and its step executions, the next
 * action. Steps run in order, each when its condition holds (`on_success`: nothing failed before
 * it; `on_failure`: something did; `always`). A failed step's own rollback runs right after its
 * failure, if the step started at all. Under fail-fast the first failure stops the forward path: the rollbacks of the steps
 * that succeeded run newest first, then the later `always` and `on_failure` steps, then the run
 * fails with the first failure's error. Cancel and the run timeout end the run once nothing is in
 * flight. The rules are documented in docs/runbooks.md.
 */
export function plan(input: PlanInput): PlanDecision {
  const { runbook, run, executions, now } = input;
  const aggregates = input.aggregates ?? [];
  // A pipeline phase is one unit, named by its first step: its other steps run inside it, per target.
  // Rollbacks inside a pipeline run per target, in the phase: the unit has none of its own.
  const steps = allSteps(runbook)
    .filter(({ step, phase }) => phase.mode !== 'pipeline' || phase.steps[0]?.id === step.id)
    .map((s) => withPhaseCondition(s.phase.mode === 'pipeline' ? withoutRollback(s.step) : s.step, s.phase));
  const states = steps.map((step) => ({ step, state: stepState(run.runId, step, 'step', executions, aggregates) }));
  const rollbackState = (step: Step) => stepState(run.runId, step, 'rollback', executions, aggregates);
  // Only a step that started on a worker can have half done anything: one refused at dispatch did not.
  const undoesItself = (step: Step) =>
    step.rollback !== undefined &&
    executions.some((e) => e.stepId === step.id && e.kind === 'step' && e.startedAt !== undefined);
  const inFlight = states.find((s) => s.state.kind === 'in_flight');
  // Something is still running: wait for it whatever else is asked (cancel lets it finish).
  if (inFlight) return advance(run.runId, inFlight.step, inFlight.state, 'step', now);
  const rollbackInFlight = steps.find((s) => rollbackState(s).kind === 'in_flight');
  if (rollbackInFlight) return advance(run.runId, rollbackInFlight, rollbackState(rollbackInFlight), 'rollback', now);

  if (run.cancelRequested) return { action: 'cancelled' };
  if (run.status === 'paused') return { action: 'pause', reason: run.error?.message ?? 'paused for an operator' };

  const started = Date.parse(run.startedAt ?? run.createdAt);
  const timedOut = now.getTime() - started > durationMs(runbook.timeout);
  const failedAt = states.findIndex((s) => s.state.kind === 'failed');
  // Under fail-fast only what ran before the failure is undone, not the steps run after it.
  const undoable = runbook.strategy === 'fail-fast' && failedAt >= 0 ? states.slice(0, failedAt) : states;
  // Each rollback runs once, in this order: the failed steps' own, then the succeeded ones', newest first.
  const rollbackOrder = [
    ...states
      .filter((s) => s.state.kind === 'failed' && undoesItself(s.step))
      .map((s) => s.step)
      .reverse(),
    ...undoable
      .filter((s) => s.step.rollback && s.state.kind === 'succeeded')
      .map((s) => s.step)
      .reverse(),
  ];
  const rolledBack = () => rollbackOrder.filter((s) => rollbackState(s).kind !== 'not_started').map((s) => s.id);
  const nextRollback = rollbackOrder.find((s) => rollbackState(s).kind === 'not_started');

  if (!run.rollbackRequested && !timedOut) {
    let failure: Step | undefined;
    for (const { step, state } of states) {
      if (state.kind === 'succeeded') continue;
      // An operator's `retry` after the step failed for good: one more attempt, now.
      if (
        state.kind === 'failed' &&
        run.operatorRetry?.stepId === step.id &&
        run.operatorRetry.attempt === state.attempt
      )
        return { action: 'dispatch', stepId: step.id, kind: 'step', attempt: state.attempt + 1 };
      if (state.kind === 'failed') {
        failure ??= step;
        // Undo what the failed step may have half done before anything else runs.
        if (undoesItself(step) && rollbackState(step).kind === 'not_started')
          return advance(run.runId, step, rollbackState(step), 'rollback', now);
        if (runbook.strategy === 'fail-fast') break;
        continue;
      }
      if (state.kind === 'not_started' && !conditionHolds(step, failure !== undefined)) continue;
      if (state.kind === 'not_started' && input.policy !== undefined) return gated(input, step);
      return advance(run.runId, step, state, 'step', now);
    }
    if (!failure) return { action: 'succeed' };
    if (runbook.strategy === 'fail-fast') {
      if (nextRollback) return advance(run.runId, nextRollback, rollbackState(nextRollback), 'rollback', now);
      // After the rollbacks, the steps past the failure that are meant to run after one.
      const after = states.slice(states.findIndex((s) => s.step.id === failure.id) + 1);
      for (const { step, state } of after) {
        if (step.condition === 'on_success' || state.kind === 'succeeded' || state.kind === 'failed') continue;
        if (state.kind === 'not_started' && input.policy !== undefined) return gated(input, step);
        return advance(run.runId, step, state, 'step', now);
      }
    }
    const first = states[failedAt];
    const error = first?.state.kind === 'failed' ? first.state.error : undefined;
    return { action: 'fail', error: failureError(first?.step ?? failure, error), rolledBack: rolledBack() };
  }

  // On request or on timeout: roll back what ran, newest first.
  if (nextRollback) return advance(run.runId, nextRollback, rollbackState(nextRollback), 'rollback', now);
  const error = run.rollbackRequested
    ? { code: 'ROLLED_BACK', message: 'rolled back on request' }
    : { code: 'RUN_TIMEOUT', message: `the run exceeded its timeout of ${runbook.timeout}` };
  return { action: 'fail', error, rolledBack: rolledBack() };
}

/**
 * A step's first dispatch, through the policy: denied, allowed, or waiting on its gate. A gate is
 * looked up by scope, so the steps of an approved phase pass; after a rejection (and an operator's
 * `retry`) the gate is asked again as a new round.
 */
function gated(input: PlanInput, step: Step): PlanDecision {
  const { runbook, now } = input;
  const verdict = decideUnit(input.policy ?? new Error('no policy'), runbook, step.id);
  const dispatch = { action: 'dispatch' as const, stepId: step.id, kind: 'step' as const, attempt: 1 };
  const { rule, reason } = verdict;
  if (verdict.outcome === 'deny') return { ...dispatch, policy: { outcome: 'deny', rule, reason } };
  const gate = verdict.outcome === 'needs_approval' ? verdict.gate : verdict.autoApproved?.gate;
  if (!gate) return { ...dispatch, policy: { outcome: 'allow', rule, reason } };

  const latest = (input.approvals ?? [])
    .filter((a) => a.scope === gate.scope && a.scopeId === gate.scopeId)
    .reduce<NonNullable<PlanInput['approvals']>[number] | undefined>(
      (last, a) => (last === undefined || a.round > last.round ? a : last),
      undefined,
    );
  if (latest?.status === 'approved')
    return {
      ...dispatch,
      policy: {
        outcome: 'allow',
        rule: 'approved',
        reason: `approval ${latest.approvalId} granted`,
        approvalId: latest.approvalId,
      },
    };
  if (latest?.status === 'expired')
    return {
      ...dispatch,
      policy: {
        outcome: 'deny',
        rule: 'approval-expired',
        reason: `approval ${latest.approvalId} was not decided before its hard limit`,
      },
    };
  const secondsUntil = (iso: string) => Math.max(1, Math.ceil((Date.parse(iso) - now.getTime()) / 1000));
  const base = {
    action: 'await_approval' as const,
    stepId: step.id,
    scope: gate.scope,
    scopeId: gate.scopeId,
    requiredApprovals: gate.requiredApprovals,
    blastRadius: gate.blastRadius,
    rule,
    reason,
  };
  if (latest && isOpen(latest.status))
    return {
      ...base,
      approvalId: latest.approvalId,
      round: latest.round,
      timeoutSeconds: secondsUntil(latest.status === 'requested' ? latest.slaDeadline : latest.hardDeadline),
    };
  // No gate yet, or the last round was rejected and an operator asked to try again.
  const round = (latest?.round ?? 0) + 1;
  const approvalId = approvalIdFor(gate, round);
  if (verdict.outcome === 'allow' && verdict.autoApproved) {
    const { confidence, threshold } = verdict.autoApproved;
    return {
      ...dispatch,
      policy: { outcome: 'allow', rule, reason, approvalId, autoApproved: { ...gate, round, confidence, threshold } },
    };
  }
  const policy = input.policy instanceof Error || input.policy === undefined ? undefined : input.policy;
  const slaSeconds = policy ? approvalDeadlines(policy, runbook.environment).slaSeconds : 1;
  return { ...base, approvalId, round, timeoutSeconds: slaSeconds };
}

/**
 * A phase's `condition` decides for its steps that keep the default (`on_success`); a step that
 * says `always` or `on_failure` keeps its own.
 */
function withPhaseCondition(step: Step, phase: Phase): Step {
  return phase.condition !== undefined && step.condition === 'on_success'
    ? { ...step, condition: phase.condition }
    : step;
}

function withoutRollback(step: Step): Step {
  const { rollback: _rollback, ...rest } = step;
  return rest;
}

/** Whether a step's first dispatch is a fan-out unit's (so Plan reads the run's aggregates). */
export function hasFanout(runbook: Pick<Runbook, 'phases'>): boolean {
  return allSteps(runbook).some(({ step }) => step.target !== undefined || unitOf(runbook, step.id)?.pipeline === true);
}

function failureError(step: Step, error: ErrorInfo | undefined): { code: string; message: string } {
  return { code: 'STEP_FAILED', message: `step '${step.id}' failed${error ? `: ${error.message}` : ''}` };
}

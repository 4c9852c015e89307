import type { InventoryReader } from './ports/inventory.js';
import type { RunRecord } from './ports/runs.js';
import { writes, type AggregateRef, type WriteIntent } from './ports/writes.js';
import { StaleWriteError } from '../domain/errors.js';
import type { ErrorInfo, StepExecution } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import { MAX_TARGETS, rateLimitsOf, unitOf } from '../domain/fanout.js';
import { describeTarget, resolveTarget, type ResolvedTarget } from '../domain/inventory.js';
import type { PlanDecision } from '../domain/planner.js';
import type { Runbook, Step } from '../domain/runbook.js';
import type { Aggregate } from '../domain/step-records.js';
import { ONCE } from '../domain/step-command.js';
import { admittedBy, refusalOf, refusedBy } from './admitted.js';
import type { ApprovalStore } from './ports/approvals.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import type { InterpreterDeps } from './plan.js';
import { draft } from './drafts.js';
import { stepDispatchChange } from './run-start.js';
import type { Fanout } from './fanout.js';
import { CANCELLED_UNSENT, endUnsent } from './unsent.js';

export interface FanoutDispatchDeps extends InterpreterDeps {
  readonly approvals: ApprovalStore;
  readonly callbacks: TaskCallbacks;
  readonly inventory: InventoryReader;
  readonly fanout: Fanout;
}

/** The one pseudo-target of a pipeline phase whose steps have no target: it runs once, anywhere. */
const ANYWHERE: ResolvedTarget = { id: ONCE, source: 'declared', attributes: {} };

/** Whether a step is dispatched as a fan-out unit: it has a target, or heads a pipeline phase. */
export function isFanoutUnit(runbook: Runbook, step: Step): boolean {
  return step.target !== undefined || unitOf(runbook, step.id)?.pipeline === true;
}

/**
 * Dispatch of a fan-out unit (a step with a target, or a pipeline phase named by its first step).
 * The first attempt resolves the target against the tenant's inventory into a fixed list kept on
 * the unit's aggregate; a retry takes the targets that have not succeeded; a rollback, the ones
 * the step started on. The aggregate and `step.dispatched` commit together, then rate control
 * starts the first wave; each result starts the next. A unit refused before any target starts
 * (policy, sandbox profile, no targets) completes at once with its reason.
 */
export function makeFanoutDispatch(deps: FanoutDispatchDeps) {
  async function targetsFor(
    record: RunRecord,
    step: Step,
    kind: 'step' | 'rollback',
    attempt: number,
    pipeline: boolean,
  ): Promise<ResolvedTarget[]> {
    const runId = record.run.runId;
    if (kind === 'rollback') {
      const started = (await deps.runs.executions(runId)).filter(
        (e) => e.stepId === step.id && e.kind === 'step' && e.startedAt !== undefined,
      );
      return unique(started.map((e) => e.target ?? { id: e.targetId, source: 'declared', attributes: {} }));
    }
    if (attempt > 1) {
      const first = await deps.runs.aggregate(runId, 'step', step.id, 1);
      const succeeded = new Set(
        (await deps.runs.executions(runId))
          .filter((e) => e.stepId === step.id && e.kind === 'step' && e.status === 'succeeded')
          .map((e) => e.targetId),
      );
      return (first?.targets ?? []).filter((t) => !succeeded.has(t.id));
    }
    if (!step.target) return pipeline ? [ANYWHERE] : [];
    const nodes = resolveTarget(step.target, await deps.inventory.list(record.run.tenantId));
    return nodes.map((n) => ({ id: n.id, source: n.source, attributes: n.attributes }));
  }

  /** Writes a unit that ends before it starts: refused with `error`, or skipped (`error` absent). */
  async function endBeforeStart(
    record: RunRecord,
    ref: AggregateRef,
    total: number,
    taskToken: string,
    events: EventDraft[],
    error: ErrorInfo | undefined,
    extra: WriteIntent[] = [],
  ): Promise<void> {
    const count = error ? Math.max(1, total) : 0;
    const aggregate: Aggregate = {
      kind: ref.stepKind,
      stepId: ref.stepId,
      attempt: ref.attempt,
      total: count,
      done: count,
      succeeded: 0,
      failed: count,
      completed: true,
      taskToken,
      targets: [],
      released: 0,
      skipped: 0,
      ...(error && { error }),
    };
    try {
      await deps.runs.mutate(
        ref.runId,
        (current) =>
          stepDispatchChange(
            current.run,
            ref.stepId,
            events,
            [...extra, writes.putAggregate(ref.runId, aggregate)],
            deps.clock.now().toISOString(),
          ),
        record,
      );
    } catch (err) {
      // An earlier delivery of this task wrote it: resume all the same.
      if (!(err instanceof StaleWriteError)) throw err;
    }
    await deps.callbacks.succeed(taskToken, {
      stepId: ref.stepId,
      kind: ref.stepKind,
      attempt: ref.attempt,
      refused: true,
    });
  }

  return async function dispatchUnit(
    record: RunRecord,
    runbook: Runbook,
    step: Step,
    decision: Extract<PlanDecision, { action: 'dispatch' }>,
    taskToken: string,
  ): Promise<void> {
    const runId = record.run.runId;
    const { kind, attempt } = decision;
    const ref: AggregateRef = { runId, stepKind: kind, stepId: step.id, attempt };
    const unit = unitOf(runbook, step.id);
    const pipeline = unit?.pipeline === true && kind === 'step';
    const now = deps.clock.now().toISOString();
    const existing = await deps.runs.aggregate(runId, kind, step.id, attempt);
    if (existing) return reattach(record, ref, existing, taskToken);
    if (record.run.cancelRequested) {
      await deps.callbacks.succeed(taskToken, { stepId: step.id, kind, attempt, cancelled: true });
      return;
    }

    const body = kind === 'rollback' && step.rollback ? step.rollback : step;
    const bodies = pipeline && unit ? unit.phase.steps : [body];
    const profile = runbook.sandbox_profile;
    const about = { stepId: step.id, meta: { sandboxProfile: profile } };
    const { policy } = decision;
    const refusal = refusalOf(policy, bodies, profile);
    if (refusal) {
      const { events, error } = refusedBy(refusal, { stepId: step.id, kind, attempt }, profile, now);
      if (refusal.action)
        deps.onViolation?.({
          runId,
          stepId: step.id,
          action: `${refusal.action.backend}.${refusal.action.action}`,
          profile,
        });
      return endBeforeStart(record, ref, 1, taskToken, events, error);
    }

    const targets = await targetsFor(record, step, kind, attempt, pipeline);
    if (targets.length === 0 || targets.length > MAX_TARGETS) {
      const selector = step.target ? describeTarget(step.target) : 'its target';
      if (targets.length === 0 && (step.if_no_targets === 'skip' || kind === 'rollback'))
        return endBeforeStart(
          record,
          ref,
          0,
          taskToken,
          [draft('step.skipped', now, { kind, attempt, reason: `${selector} resolved to no node` }, about)],
          undefined,
        );
      const error = {
        code: targets.length === 0 ? 'NO_TARGETS' : 'TOO_MANY_TARGETS',
        message:
          targets.length === 0
            ? `${selector} resolved to no node in the inventory`
            : `${selector} resolved to ${targets.length} nodes; a step may act on at most ${MAX_TARGETS}`,
        retryable: false,
      };
      return endBeforeStart(
        record,
        ref,
        1,
        taskToken,
        [draft('step.failed', now, { kind, attempt, outcome: 'failed', error }, about)],
        error,
      );
    }

    const limits = rateLimitsOf(pipeline && unit ? unit.phase : step, runbook.strategy, targets.length);
    const admitted = admittedBy(record.run, step.id, body, policy, deps.clock.now());
    const aggregate: Aggregate = {
      kind,
      stepId: step.id,
      attempt,
      total: targets.length,
      done: 0,
      succeeded: 0,
      failed: 0,
      completed: false,
      taskToken,
      targets,
      released: 0,
      skipped: 0,
      limits,
      ...(pipeline && { pipeline: true }),
    };
    try {
      const committed = await deps.runs.mutate(
        runId,
        (current) =>
          stepDispatchChange(
            current.run,
            step.id,
            [
              ...admitted.events,
              draft(
                'step.dispatched',
                now,
                {
                  kind,
                  attempt,
                  backend: body.backend,
                  action: body.action,
                  targets: targets.map((t) => t.id),
                  expected: targets.length,
                  mode: pipeline ? 'pipeline' : 'barrier',
                  maxConcurrency: limits.maxConcurrency,
                  maxErrors: limits.haltAfter,
                  ramp: limits.ramp ? 'exponential' : 'none',
                },
                about,
              ),
            ],
            [...admitted.writes, writes.putAggregate(runId, aggregate)],
            now,
          ),
        record,
      );
      await deps.fanout.release(runId, ref, committed?.record);
    } catch (error) {
      // Another delivery of this task wrote it first: re-attach to what it wrote.
      if (!(error instanceof StaleWriteError)) throw error;
      const written = await deps.runs.aggregate(runId, kind, step.id, attempt);
      if (written) await reattach(record, ref, written, taskToken);
    }
  };

  /**
   * The same unit dispatched again (a Lambda retry, the interpreter resumed after a restart):
   * the aggregate gets the new token, what no worker has finished is sent again (leases make
   * that harmless), rate control goes on, and a complete unit resumes the interpreter at once.
   */
  async function reattach(
    record: RunRecord,
    ref: AggregateRef,
    aggregate: Aggregate,
    taskToken: string,
  ): Promise<void> {
    const { runId } = ref;
    // As the token write left it: a completion that came in since resumed the old task, which is gone.
    const current =
      (await deps.runs.setAggregateToken(runId, ref.stepKind, ref.stepId, ref.attempt, taskToken)) ?? aggregate;
    if (current.completed) {
      await deps.callbacks.succeed(taskToken, { stepId: ref.stepId, attempt: ref.attempt, reattached: true });
      return;
    }
    const mine = (e: StepExecution) =>
      e.kind === ref.stepKind &&
      (aggregate.pipeline ? e.pipeline?.head === ref.stepId : e.stepId === ref.stepId && e.attempt === ref.attempt);
    if (record.run.cancelRequested) {
      await endUnsent(deps, runId, (e) => (mine(e) ? CANCELLED_UNSENT : undefined));
      await deps.fanout.release(runId, ref);
      return;
    }
    const open = (await deps.runs.executions(runId)).filter(
      (e) => mine(e) && ['pending', 'leased', 'running'].includes(e.status),
    );
    const runbook = await deps.fanout.runbookFor(record.run);
    await deps.fanout.send(record, runbook, open);
    await deps.fanout.release(runId, ref);
  }
}

function unique(targets: readonly ResolvedTarget[]): ResolvedTarget[] {
  const seen = new Map<string, ResolvedTarget>();
  for (const t of targets) if (!seen.has(t.id)) seen.set(t.id, t);
  return [...seen.values()];
}

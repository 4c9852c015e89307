import type { CommandQueue, TaskCallbacks } from './ports/interpreter.js';
import type { ApprovalStore } from './ports/approvals.js';
import type { CarriedRun } from './ports/runs.js';
import { writes } from './ports/writes.js';
import { admittedBy, type Refusal, refusalOf, refusedBy } from './admitted.js';
import { isFanoutUnit, makeFanoutDispatch } from './dispatch-fanout.js';
import { makeFanout, newExecution } from './fanout.js';
import type { InventoryReader } from './ports/inventory.js';
import { StaleWriteError } from '../domain/errors.js';
import type { StepExecution } from '../domain/entities.js';
import type { ChainHead } from '../domain/events.js';
import type { Aggregate } from '../domain/step-records.js';
import type { PlanDecision } from '../domain/planner.js';
import { allSteps } from '../domain/runbook.js';
import type { SandboxProfileName } from '../domain/sandbox-profiles.js';
import type { InterpreterDeps } from './plan.js';
import { runbookOf } from './runs.js';
import { draft } from './drafts.js';
import { stepDispatchChange } from './run-start.js';
import { CANCELLED_UNSENT, endUnsent } from './unsent.js';

export interface DispatchDeps extends InterpreterDeps {
  readonly approvals: ApprovalStore;
  readonly queue: CommandQueue;
  readonly callbacks: TaskCallbacks;
  /** The tenant's nodes, which a step's target resolves against at its first dispatch. */
  readonly inventory: InventoryReader;
}

/**
 * Dispatch: writes the step executions and the step's aggregate with `step.dispatched` in one
 * transaction, then sends the commands. Dispatching the same attempt again (a Lambda retry, or
 * the interpreter resumed after a restart) re-attaches: the aggregate gets the new task token,
 * unfinished commands are sent again (workers' leases make that harmless), and an aggregate that
 * already completed resumes the execution at once.
 */
export function makeDispatch(deps: DispatchDeps) {
  const fanout = makeFanout(deps);
  const dispatchUnit = makeFanoutDispatch({ ...deps, fanout });
  /**
   * Records a step that may not run as failed for good, and resumes: denied by the policy (with
   * `policy.decided`), or not allowed by the sandbox profile (with `sandbox.violation` too).
   */
  async function refuse(
    execution: StepExecution,
    refusal: Refusal,
    profile: SandboxProfileName,
    now: string,
    taskToken: string,
  ): Promise<boolean> {
    const { runId, stepId, kind, attempt } = execution;
    const { events, error } = refusedBy(refusal, { stepId, kind, attempt }, profile, now);
    try {
      await deps.runs.mutate(runId, (current) =>
        stepDispatchChange(
          current.run,
          stepId,
          events,
          [
            writes.putExecution({ ...execution, status: 'failed', endedAt: now, error }),
            writes.putAggregate(runId, {
              kind,
              stepId,
              attempt,
              total: 1,
              done: 1,
              succeeded: 0,
              failed: 1,
              completed: true,
              taskToken,
            }),
          ],
          now,
        ),
      );
    } catch (err) {
      // Written already by an earlier delivery of this task: the caller re-attaches to it.
      if (err instanceof StaleWriteError) return false;
      throw err;
    }
    if (refusal.action)
      deps.onViolation?.({ runId, stepId, action: `${refusal.action.backend}.${refusal.action.action}`, profile });
    await deps.callbacks.succeed(taskToken, { stepId, kind, attempt, refused: true });
    return true;
  }

  /**
   * `carried` is the run as Plan decided on it, when it travelled with the decision: the write is
   * made from it without a read. Should the run have changed since, nothing is written from it and
   * the dispatch starts again from the run as it is, as if nothing had been carried.
   */
  return async function dispatch(
    runId: string,
    decision: Extract<PlanDecision, { action: 'dispatch' }>,
    taskToken: string,
    carried?: CarriedRun,
  ): Promise<void> {
    const held = carried && carried.record.run.runId === runId ? deps.runs.hold(carried) : undefined;
    /** The dispatch again from the run as it is, as if nothing had been carried. */
    const afresh = () => dispatch(runId, decision, taskToken);
    const record = held ?? (await deps.runs.load(runId));
    if (!record) throw new Error(`run ${runId} does not exist`);
    const runbook = await runbookOf(deps.runbooks, record.run);
    const step = allSteps(runbook).find((s) => s.step.id === decision.stepId)?.step;
    if (!step) throw new Error(`run ${runId} has no step ${decision.stepId}`);
    // A fan-out unit works from the run as it is.
    if (held && isFanoutUnit(runbook, step)) return afresh();
    if (isFanoutUnit(runbook, step)) return dispatchUnit(record, runbook, step, decision, taskToken);
    const { kind, attempt } = decision;
    const now = deps.clock.now().toISOString();

    const cancelled = record.run.cancelRequested;
    // Writing first is the common case; only a cancel needs to know beforehand what was written.
    const existing = cancelled ? await deps.runs.aggregate(runId, kind, step.id, attempt) : undefined;
    // Cancelled before this attempt was written: nothing to send, Plan ends the run.
    const resumeCancelled = () =>
      deps.callbacks.succeed(taskToken, { stepId: step.id, kind, attempt, cancelled: true });
    if (!existing && cancelled) {
      await resumeCancelled();
      return;
    }
    let fresh: { aggregate: Aggregate; executions: readonly StepExecution[]; head: ChainHead } | undefined;
    let writtenEarlier = false;
    if (!existing) {
      const execution = newExecution(record.run, kind, step.id, attempt, undefined, now);
      const executions = [execution];
      const body = kind === 'rollback' && step.rollback ? step.rollback : step;
      const profile = runbook.sandbox_profile;
      // Refused before anything is queued: the step fails for good and the run goes on from there.
      const { policy } = decision;
      const refusal = refusalOf(policy, [body], profile);
      // A refusal is written from the run as it is (a cancel since means nothing is refused).
      if (refusal && held) return afresh();
      if (refusal) {
        if (await refuse(execution, refusal, profile, now, taskToken)) return;
        writtenEarlier = true;
      }
      const admitted = admittedBy(record.run, step.id, body, policy, deps.clock.now());
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
      // Set when the carried run turns out not to be the run as it is: nothing is written from it.
      let moved = false;
      if (!writtenEarlier)
        try {
          const committed = await deps.runs.mutate(
            runId,
            (current) => {
              if (held && current !== held) {
                moved = true;
                return undefined;
              }
              // Read again after a refused write: a cancel that came in since means nothing is written.
              if (current.run.cancelRequested) return undefined;
              return stepDispatchChange(
                current.run,
                step.id,
                [
                  ...admitted.events,
                  draft(
                    'step.dispatched',
                    now,
                    { kind, attempt, backend: body.backend, action: body.action, targets: [execution.targetId] },
                    { stepId: step.id, meta: { sandboxProfile: runbook.sandbox_profile } },
                  ),
                ],
                [
                  ...admitted.writes,
                  ...executions.map((e) => writes.putExecution(e)),
                  writes.putAggregate(runId, written),
                ],
                now,
              );
            },
            record,
          );
          if (!committed && moved) return afresh();
          if (!committed) {
            // Cancelled between this task's read and its write: the same.
            await resumeCancelled();
            return;
          }
          fresh = { aggregate: written, executions, head: committed.record.head };
        } catch (error) {
          // Another dispatch of the same attempt won: fall through to re-attach.
          if (!(error instanceof StaleWriteError)) throw error;
        }
    }
    // What this dispatch wrote needs no reading back; a re-attach reads what the first one wrote.
    // A re-attach reads the aggregate as its new token left it: a result that completed it before the
    // token was written resumed the old task, which is gone, so this one resumes at once.
    const aggregate = fresh?.aggregate ?? (await deps.runs.setAggregateToken(runId, kind, step.id, attempt, taskToken));
    if (!aggregate) throw new Error(`aggregate for ${step.id} attempt ${attempt} is missing`);
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
    // A command no queue can carry fails its execution for good; sending it again cannot help.
    const single = aggregate.total === 1 ? { taskToken, chainHead: fresh?.head ?? record.head } : undefined;
    await fanout.send(record, runbook, executions, single);
  };
}

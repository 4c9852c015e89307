import type { CommandQueue, TaskCallbacks } from './ports/interpreter.js';
import type { ApprovalStore } from './ports/approvals.js';
import { writes } from './ports/writes.js';
import { admittedBy } from './admitted.js';
import { isFanoutUnit, makeFanoutDispatch } from './dispatch-fanout.js';
import { makeFanout } from './fanout.js';
import type { InventoryReader } from './ports/inventory.js';
import { StaleWriteError } from '../domain/errors.js';
import type { ErrorInfo, StepExecution } from '../domain/entities.js';
import type { Aggregate } from '../domain/step-records.js';
import type { StepCommand } from '../domain/messages.js';
import type { PlanDecision } from '../domain/planner.js';
import { allSteps } from '../domain/runbook.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../domain/sandbox-profiles.js';
import { commandFor, ONCE } from '../domain/step-command.js';
import type { InterpreterDeps } from './plan.js';
import { runbookOf } from './runs.js';
import { draft } from './drafts.js';
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
  const dispatchUnit = makeFanoutDispatch({ ...deps, fanout: makeFanout(deps) });
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
    if (isFanoutUnit(runbook, step)) return dispatchUnit(record, runbook, step, decision, taskToken);
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
      const targets = [ONCE];
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
      if (!writtenEarlier)
        try {
          await deps.runs.mutate(
            runId,
            () => ({
              run: { currentStepId: step.id, updatedAt: now },
              events: [
                ...admitted.events,
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
                ...admitted.writes,
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

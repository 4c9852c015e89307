import type { CommandQueue, TaskCallbacks } from './ports/interpreter.js';
import type { InventoryReader } from './ports/inventory.js';
import type { RunRecord, RunStore } from './ports/runs.js';
import { writes, type AggregateRef } from './ports/writes.js';
import type { Clock, RunbookStore } from './ports.js';
import { StaleWriteError } from '../domain/errors.js';
import type { ErrorInfo, Run, StepExecution } from '../domain/entities.js';
import { firstRunnable, MAX_TARGETS, nextRelease, unitOf } from '../domain/fanout.js';
import type { ResolvedTarget } from '../domain/inventory.js';
import type { StepCommand } from '../domain/messages.js';
import { allSteps, type Runbook } from '../domain/runbook.js';
import type { Aggregate } from '../domain/step-records.js';
import { commandFor, executionIdOf, ONCE } from '../domain/step-command.js';
import { draft } from './drafts.js';
import { runbookOf } from './runs.js';
import { endUnsent } from './unsent.js';
import { claimAndResume } from './completion.js';

export interface FanoutDeps {
  readonly runs: RunStore;
  readonly runbooks: RunbookStore;
  readonly queue: CommandQueue;
  readonly callbacks: TaskCallbacks;
  readonly clock: Clock;
  /**
   * The tenant's inventory, to fail at once a command for an agent node that is offline
   * (`TARGET_OFFLINE`) instead of leaving it in the node's queue until the agent returns.
   */
  readonly inventory?: InventoryReader;
}

/** Executions created per transaction, beside the run's head and the aggregate. */
const RELEASE_CHUNK = 90;

/**
 * A new execution of `stepId` on `target` (a release, a pipeline's next sub-step), or, without a
 * target, of a step that runs once on any worker of its profile.
 */
export function newExecution(
  run: { readonly runId: string; readonly tenantId: string },
  kind: 'step' | 'rollback',
  stepId: string,
  attempt: number,
  target: ResolvedTarget | undefined,
  now: string,
  pipeline?: StepExecution['pipeline'],
): StepExecution {
  const targetId = target?.id ?? ONCE;
  return {
    executionId: executionIdOf(run.runId, kind, stepId, attempt, targetId),
    runId: run.runId,
    tenantId: run.tenantId,
    stepId,
    kind,
    targetId,
    attempt,
    status: 'pending',
    // Stable across attempts: a receipt written by an attempt that succeeded is found by the next.
    idempotencyKey: `${run.runId}.${kind}.${stepId}.${targetId}`,
    createdAt: now,
    outputTail: [],
    secretsUsed: [],
    ...(target && { target }),
    ...(pipeline && { pipeline }),
  };
}

/**
 * Rate control of fan-out units: starts a unit's waiting targets as in-flight ones end (up to
 * `max_concurrency`, ramping when asked), and once the error budget is spent (or the run is
 * cancelled) counts the rest as skipped so the unit completes. Dispatch calls it for the first
 * wave, each result for the next, the reconciler to repair a release a crash interrupted. Each
 * release moves the aggregate's `released` mark with a condition, so two callers never start
 * the same target; the executions it creates commit in the same transaction.
 */
export function makeFanout(deps: FanoutDeps) {
  const runbookCache = new Map<string, Promise<Runbook>>();
  function runbookFor(run: Run): Promise<Runbook> {
    const key = `${run.runbookId}@${run.runbookVersion}`;
    let cached = runbookCache.get(key);
    if (!cached) {
      cached = runbookOf(deps.runbooks, run);
      runbookCache.set(key, cached);
      cached.catch(() => runbookCache.delete(key));
    }
    return cached;
  }

  /** The agent nodes among `executions`' targets that are offline now, with when they were last seen. */
  async function offlineAgents(tenantId: string, executions: readonly StepExecution[]): Promise<Map<string, string>> {
    const offline = new Map<string, string>();
    if (!deps.inventory || !executions.some((e) => e.target?.source === 'agent')) return offline;
    const nodes = new Map((await deps.inventory.list(tenantId)).map((n) => [n.id, n]));
    for (const e of executions) {
      if (e.target?.source !== 'agent') continue;
      const node = nodes.get(e.target.id);
      if (!node || node.status === 'offline') offline.set(e.target.id, node ? `last seen ${node.lastSeen}` : 'removed');
    }
    return offline;
  }

  /**
   * Sends the commands of new executions; one the queue refuses, or for an agent node that is
   * offline, fails for good (counted into its unit). Resolves how many failed.
   */
  async function send(
    record: RunRecord,
    runbook: Runbook,
    executions: readonly StepExecution[],
    /** For a step of one execution: the task waiting on it and the run's chain head, for its command to carry. */
    single?: Pick<StepCommand, 'taskToken' | 'chainHead'>,
  ): Promise<number> {
    if (executions.length === 0) return 0;
    const failures = new Map<string, ErrorInfo>();
    const commands: StepCommand[] = [];
    const offline = await offlineAgents(record.run.tenantId, executions);
    for (const e of executions) {
      const gone = offline.get(e.targetId);
      if (gone !== undefined) {
        failures.set(e.executionId, {
          code: 'TARGET_OFFLINE',
          message: `agent node ${e.targetId} is offline (${gone})`,
          retryable: false,
        });
        continue;
      }
      const step = allSteps(runbook).find((s) => s.step.id === e.stepId)?.step;
      if (!step) continue;
      try {
        const alone = executions.length === 1 && !e.target && !e.pipeline;
        commands.push(commandFor(runbook, record.run, step, e, alone ? single : undefined));
      } catch (error) {
        failures.set(e.executionId, {
          code: 'PARAMS_INVALID',
          message: `the step's params could not be rendered${e.target ? ` for ${e.targetId}` : ''}: ${(error as Error).message}`,
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
    if (failures.size === 0) return 0;
    await endUnsent(deps, record.run.runId, (e) => {
      const error = failures.get(e.executionId);
      return error && { status: 'failed', error };
    });
    return failures.size;
  }

  /** The first executions of released targets: the unit's step, or a pipeline's first runnable sub-step. */
  function firstExecutions(
    run: Run,
    runbook: Runbook,
    ref: AggregateRef,
    aggregate: Aggregate,
    targets: readonly ResolvedTarget[],
    now: string,
  ): StepExecution[] {
    if (!aggregate.pipeline)
      return targets.map((t) => newExecution(run, ref.stepKind, ref.stepId, ref.attempt, t, now));
    const unit = unitOf(runbook, ref.stepId);
    const first = unit ? firstRunnable(unit.phase, 0, false) : undefined;
    if (!first || first.kind !== 'run') return [];
    return targets.map((t) =>
      newExecution(run, 'step', first.stepId, 1, t, now, { head: ref.stepId, failedBefore: false }),
    );
  }

  /**
   * Starts or skips what the unit's limits allow now; repeats while another caller moved it first.
   * Resolves whether the unit may be complete now (every target counted), so a caller that
   * counted a result claims the completion only then: reading after its own count, the writer of
   * the last count always sees it.
   */
  async function release(runId: string, ref: AggregateRef, known?: RunRecord): Promise<boolean> {
    let held = known;
    // Each pass makes progress (targets started, failed before starting, or skipped) or lost a race.
    let races = 0;
    for (let pass = 0; races < 10 && pass <= MAX_TARGETS; pass++) {
      const aggregate = await deps.runs.aggregate(runId, ref.stepKind, ref.stepId, ref.attempt);
      if (!aggregate) return false;
      if (aggregate.completed) return false;
      if (!aggregate.targets || !aggregate.limits) return aggregate.done >= aggregate.total;
      const record = held ?? (await deps.runs.load(runId));
      held = undefined;
      if (!record) return false;
      const released = aggregate.released ?? 0;
      const next = nextRelease(
        aggregate.limits,
        { total: aggregate.total, released, done: aggregate.done, failed: aggregate.failed },
        record.run.cancelRequested,
      );
      if (next.kind === 'none') return aggregate.done >= aggregate.total;
      const now = deps.clock.now().toISOString();
      try {
        if (next.kind === 'halt') {
          const reason = record.run.cancelRequested
            ? 'the run was cancelled'
            : `${aggregate.failed} target(s) failed, more than max_errors allows (${aggregate.limits.haltAfter})`;
          await deps.runs.mutate(runId, () => ({
            events: [
              draft(
                'step.halted',
                now,
                { kind: ref.stepKind, attempt: ref.attempt, skipped: next.skipped, failed: aggregate.failed, reason },
                { stepId: ref.stepId },
              ),
            ],
            writes: [writes.skipTargets(ref, released, next.skipped)],
          }));
          await complete(runId, ref);
          return false;
        }
        const runbook = await runbookFor(record.run);
        const started = aggregate.targets.slice(released, released + Math.min(next.count, RELEASE_CHUNK));
        const executions = firstExecutions(record.run, runbook, ref, aggregate, started, now);
        // The release's own condition (`released` unchanged) guards it: no event, so no need of the run's head.
        await deps.runs.stage(
          runId,
          [],
          [
            writes.releaseTargets(ref, released, released + started.length),
            ...executions.map((e) => writes.putExecution(e)),
          ],
        );
        const failed = await send(record, runbook, executions);
        // Targets that failed before starting free their places at once: look again.
        if (failed === 0 && started.length === next.count) return false;
      } catch (error) {
        // Another result released (or skipped) first: look again.
        if (!(error instanceof StaleWriteError)) throw error;
        races++;
      }
    }
    return true;
  }

  /** Resumes the interpreter task waiting on a unit that is now complete, exactly once. */
  async function complete(runId: string, ref: AggregateRef): Promise<void> {
    // Every target's events enter the chain before the interpreter records what follows them.
    await deps.runs.sequence(runId);
    await claimAndResume(deps, { runId, kind: ref.stepKind, stepId: ref.stepId, attempt: ref.attempt });
  }

  return { release, complete, send, runbookFor };
}

export type Fanout = ReturnType<typeof makeFanout>;

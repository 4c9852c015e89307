import { randomUUID } from 'node:crypto';
import type { RunStore } from '../adapters/dynamodb/run-store.js';
import type { Json } from '../domain/canonical.js';
import { durationMs } from '../domain/duration.js';
import type { Run, StepExecution } from '../domain/entities.js';
import type { EventDraft } from '../domain/events.js';
import type { StepCommand } from '../domain/messages.js';
import { plan, type PlanDecision } from '../domain/planner.js';
import { allSteps, type Runbook, type Step } from '../domain/runbook.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../domain/sandbox-profiles.js';
import { runStateMachine, type RunStatus } from '../domain/statuses.js';
import { substitute } from '../domain/template.js';
import type { Clock, RunbookStore } from './ports.js';
import { runbookOf } from './runs.js';

/** Sends step commands to a sandbox profile's queue. */
export interface CommandQueue {
  send(profile: SandboxProfileName, commands: readonly StepCommand[]): Promise<void>;
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

const draft = (type: EventDraft['type'], now: string, payload: Record<string, Json>, more: Partial<EventDraft> = {}) =>
  ({ eventId: randomUUID(), type, timestamp: now, payload, meta: {}, ...more }) as EventDraft;

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
      return { status: run.status === 'queued' ? 'running' : run.status, events: [] };
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
export function makePlanNext(deps: InterpreterDeps) {
  return async function planNext(runId: string): Promise<PlanDecision> {
    let decision: PlanDecision | undefined;
    const loaded = await deps.runs.load(runId);
    if (!loaded) throw new Error(`run ${runId} does not exist`);
    const runbook = await runbookOf(deps.runbooks, loaded.run);
    // Each pass reads the run and its executions afresh and commits only against that same state.
    for (let attempt = 0; attempt < 10; attempt++) {
      const [record, executions] = await Promise.all([deps.runs.load(runId), deps.runs.executions(runId)]);
      if (!record) throw new Error(`run ${runId} does not exist`);
      const now = deps.clock.now();
      const { run } = record;
      if (runStateMachine.isTerminal(run.status)) return terminalDecision(run);
      decision = plan({
        runbook,
        run: { ...run, rollbackRequested: record.rollbackRequested },
        executions,
        now,
      });
      const change = transitionFor(run, decision, now.toISOString());
      const startEvents = run.status === 'queued' ? [draft('run.started', now.toISOString(), {})] : [];
      if (change.status === run.status && startEvents.length === 0 && change.events.length === 0) return decision;
      // From queued, the run starts first; the decision's own transition follows.
      if (change.status !== run.status && run.status !== 'queued')
        runStateMachine.transition(run.status, change.status);
      const committed = await deps.runs.mutate(runId, (current) =>
        current.head.seq !== record.head.seq
          ? undefined
          : {
              run: {
                status: change.status,
                updatedAt: now.toISOString(),
                ...(run.status === 'queued' && { startedAt: now.toISOString() }),
                ...(runStateMachine.isTerminal(change.status) && { endedAt: now.toISOString() }),
                ...(decision?.action === 'fail' && { error: decision.error }),
                ...(decision?.action === 'dispatch' && { currentStepId: decision.stepId }),
              },
              events: [...startEvents, ...change.events],
            },
      );
      if (committed) return decision;
      // Someone changed the run while we decided (a cancel, a result): decide again.
    }
    throw new Error(`could not plan run ${runId}: it keeps changing`);
  };
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
export function makeDispatch(deps: InterpreterDeps & { queue: CommandQueue; callbacks: TaskCallbacks }) {
  /** Records a step its sandbox profile does not allow as failed, with `sandbox.violation`, and resumes. */
  async function refuse(
    stepId: string,
    kind: 'step' | 'rollback',
    attempt: number,
    executions: readonly StepExecution[],
    body: { backend: string; action: string },
    profile: SandboxProfileName,
    now: string,
    taskToken: string,
  ): Promise<void> {
    const runId = executions[0]?.runId ?? '';
    const reason = `${body.backend}.${body.action} is not allowed by sandbox profile ${profile}`;
    const error = { code: 'SANDBOX_VIOLATION', message: reason, retryable: false };
    try {
      await deps.runs.mutate(runId, () => ({
        run: { currentStepId: stepId, updatedAt: now },
        events: [
          draft(
            'sandbox.violation',
            now,
            { backend: body.backend, action: body.action, sandboxProfile: profile, enforcedBy: 'dispatcher', reason },
            { stepId, meta: { sandboxProfile: profile } },
          ),
          draft('step.failed', now, { kind, attempt, outcome: 'failed', error }, { stepId }),
        ],
        writes: [
          ...executions.map((e) => deps.runs.putExecution({ ...e, status: 'failed', endedAt: now, error })),
          deps.runs.putAggregate(runId, {
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
      // Recorded already by an earlier delivery of this task.
      if ((err as Error).name !== 'StaleWriteError') throw err;
    }
    deps.onViolation?.({ runId, stepId, action: `${body.backend}.${body.action}`, profile });
    await deps.callbacks.succeed(taskToken, { stepId, kind, attempt, refused: true });
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

    const existing = await deps.runs.aggregate(runId, kind, step.id, attempt);
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
      if (!profileAllows(SANDBOX_PROFILES[profile], body.backend, body.action)) {
        // Refused before anything is queued: the step fails for good and the run goes on from there.
        await refuse(step.id, kind, attempt, executions, body, profile, now, taskToken);
        return;
      }
      try {
        await deps.runs.mutate(runId, () => ({
          run: { currentStepId: step.id, updatedAt: now },
          events: [
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
            ...executions.map((e) => deps.runs.putExecution(e)),
            deps.runs.putAggregate(runId, {
              kind,
              stepId: step.id,
              attempt,
              total: executions.length,
              done: 0,
              succeeded: 0,
              failed: 0,
              completed: false,
              taskToken,
            }),
          ],
        }));
      } catch (error) {
        // Another dispatch of the same attempt won: fall through to re-attach.
        if ((error as Error).name !== 'StaleWriteError') throw error;
      }
    }
    const aggregate = existing ?? (await deps.runs.aggregate(runId, kind, step.id, attempt));
    if (!aggregate) throw new Error(`aggregate for ${step.id} attempt ${attempt} is missing`);
    if (existing) await deps.runs.setAggregateToken(runId, kind, step.id, attempt, taskToken);
    if (aggregate.completed) {
      await deps.callbacks.succeed(taskToken, { stepId: step.id, attempt, reattached: true });
      return;
    }
    const executions = (await deps.runs.executions(runId)).filter(
      (e) =>
        e.stepId === step.id &&
        e.kind === kind &&
        e.attempt === attempt &&
        ['pending', 'leased', 'running'].includes(e.status),
    );
    await deps.queue.send(
      runbook.sandbox_profile,
      executions.map((e) => commandFor(runbook, record.run, step, e)),
    );
  };
}

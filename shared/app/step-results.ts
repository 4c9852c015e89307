import { randomUUID } from 'node:crypto';
import type { LeaseOutcome, RunChange, RunStore } from './ports/runs.js';
import { StaleWriteError } from '../domain/errors.js';
import { laneEvents, type LaneMark } from '../domain/inbox.js';
import { makeSequencer } from './inbox-sequencer.js';
import { writes } from './ports/writes.js';
import type { Json } from '../domain/canonical.js';
import type { ErrorInfo, StepExecution } from '../domain/entities.js';
import type { ChainHead, EventDraft } from '../domain/events.js';
import type { StepCommand } from '../domain/messages.js';
import type { Receipt } from '../domain/step-records.js';
import type { Clock } from './ports.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import { newExecution, type Fanout } from './fanout.js';
import { countsInto } from './unsent.js';
import { pipelineNext, unitOf } from '../domain/fanout.js';
import type { Later } from './later.js';
import { claimAndResume, completionOutput } from './completion.js';

export interface StepResultDeps {
  readonly runs: RunStore;
  readonly callbacks: TaskCallbacks;
  readonly clock: Clock;
  /** Rate control and pipelines: starts what a result lets start. Without it a fan-out unit does not advance. */
  readonly fanout?: Fanout;
  /**
   * Where resuming the interpreter after a step's result goes, so the worker takes its next
   * command meanwhile; without it, `finished` waits for the resume. A resume lost with its worker
   * is sent again by the reconciler (its lost-resume rule).
   */
  readonly later?: Later;
}

export type Outcome =
  | { readonly outcome: 'succeeded'; readonly output?: Record<string, Json>; readonly fromReceipt?: boolean }
  | { readonly outcome: 'failed' | 'timed_out'; readonly error: ErrorInfo };

/** A target of a fan-out (or a pipeline's sub-step): its events go through the run's inbox. */
const fannedOut = (cmd: StepCommand) => cmd.target !== undefined || cmd.pipeline !== undefined;

/** Lines kept on the step execution for the run view. */
const OUTPUT_TAIL_LINES = 20;
/** Output events per transaction: with the run's head and the execution, under DynamoDB's 100 items. */
const OUTPUT_EVENTS_PER_TRANSACTION = 90;
/** Output text per transaction, well under DynamoDB's 4 MB (a line may be as long as the step's cap). */
const OUTPUT_BYTES_PER_TRANSACTION = 1024 * 1024;
/** The last output lines that may ride in the result's own transaction (beside its receipt and output). */
const LAST_OUTPUT_LINES = 50;
const LAST_OUTPUT_BYTES = 256 * 1024;

/** One line of a step's output, numbered per step execution. */
export interface OutputLine {
  readonly stream: 'stdout' | 'stderr';
  readonly text: string;
  readonly streamSeq: number;
}

/** Splits output lines, in order, into groups that each fit one transaction. */
function transactionSized<T extends { readonly text: string }>(lines: readonly T[]): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let bytes = 0;
  for (const line of lines) {
    const size = Buffer.byteLength(line.text);
    if (
      group.length > 0 &&
      (group.length >= OUTPUT_EVENTS_PER_TRANSACTION || bytes + size > OUTPUT_BYTES_PER_TRANSACTION)
    ) {
      groups.push(group);
      group = [];
      bytes = 0;
    }
    group.push(line);
    bytes += size;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}

const draft = (
  cmd: StepCommand,
  type: EventDraft['type'],
  now: string,
  payload: Record<string, Json>,
  workerId: string,
): EventDraft => ({
  eventId: randomUUID(),
  type,
  timestamp: now,
  stepId: cmd.stepId,
  targetId: cmd.targetId,
  payload,
  meta: { workerId, sandboxProfile: cmd.sandboxProfile, correlationId: cmd.correlationId },
});

/**
 * What a worker records about a step execution it holds the lease of. Every record is one
 * transaction: the execution's new state (guarded by the lease), its event, and for the end of the
 * execution the receipt and the step's aggregate. Whoever completes the aggregate resumes the
 * interpreter, exactly once.
 */
export function makeStepResults(deps: StepResultDeps) {
  const { runs } = deps;
  /**
   * What this writer last committed for each execution it holds the lease of, and the run's chain
   * head as that commit left it (a fan-out target stages its events and holds no head): the next
   * record starts from them instead of reading them back. The lease guards the execution and the
   * chain head's condition the log, so a stale copy costs a retry, not a lost write.
   */
  const held = new Map<string, { execution: StepExecution; head?: ChainHead }>();

  async function current(cmd: StepCommand): Promise<StepExecution> {
    const known = held.get(cmd.executionId)?.execution;
    if (known) return known;
    const execution = await runs.execution(cmd.runId, cmd.executionId);
    if (!execution) throw new Error(`step execution ${cmd.executionId} does not exist`);
    return execution;
  }

  /** Where each fanned-out execution's lane stands, until the execution ends. */
  const lanes = new Map<string, LaneMark>();

  const sequenceSoon = makeSequencer(runs);

  /**
   * A target of a fan-out stages its events in the run's inbox instead of writing the run's head,
   * so targets never wait on each other.
   */
  async function stage(cmd: StepCommand, body: RunChange): Promise<void> {
    const { staged, mark } = laneEvents(cmd.executionId, lanes.get(cmd.executionId), body.events);
    await runs.stage(cmd.runId, staged, body.writes ?? []);
    lanes.set(cmd.executionId, mark);
    await sequenceSoon(cmd.runId);
  }

  /** Commits a change about `cmd`'s execution; a stale held copy is dropped and read again once. */
  async function record(
    cmd: StepCommand,
    change: (execution: StepExecution) => { next: StepExecution; change: RunChange },
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const fromHeld = held.has(cmd.executionId);
      const { next, change: body } = change(await current(cmd));
      try {
        if (fannedOut(cmd)) {
          await stage(cmd, body);
          held.set(cmd.executionId, { execution: next });
          return;
        }
        // A worker's records leave the run entity as it is: they only append, on the head the
        // last one left, or the one Dispatch's command carried for the first.
        const { head } = await runs.append(cmd, body, held.get(cmd.executionId)?.head ?? cmd.chainHead);
        held.set(cmd.executionId, { execution: next, head });
        return;
      } catch (error) {
        held.delete(cmd.executionId);
        if (!(error instanceof StaleWriteError) || !fromHeld || attempt > 0) throw error;
      }
    }
  }

  /** Where a pipeline's target goes after this sub-step, with the runbook that says so. */
  async function pipelineStep(cmd: StepCommand, result: Outcome) {
    const fanout = deps.fanout;
    const record = await runs.load(cmd.runId);
    if (!fanout || !record || !cmd.pipeline) return undefined;
    const runbook = await fanout.runbookFor(record.run);
    const phase = unitOf(runbook, cmd.stepId)?.phase;
    if (!phase) return undefined;
    const next = pipelineNext(phase, {
      kind: cmd.kind,
      stepId: cmd.stepId,
      attempt: cmd.attempt,
      succeeded: result.outcome === 'succeeded',
      ...(result.outcome !== 'succeeded' &&
        result.error.retryable !== undefined && { retryable: result.error.retryable }),
      failedBefore: cmd.pipeline.failedBefore,
    });
    return { runbook, next, record };
  }

  /**
   * A batch of output lines as `step.output` events, each with its per-execution `streamSeq`,
   * in order. A transaction holds at most 100 items (and 4 MB), so a large batch is recorded as
   * several, each chained on the head the previous one left.
   */
  async function output(cmd: StepCommand, workerId: string, chunks: readonly OutputLine[]): Promise<void> {
    for (const part of transactionSized(chunks)) {
      const now = deps.clock.now().toISOString();
      await record(cmd, (execution) => {
        const tail = [...execution.outputTail, ...part.map((c) => c.text)].slice(-OUTPUT_TAIL_LINES);
        const next = { ...execution, outputTail: tail };
        return {
          next,
          change: {
            events: part.map((c) =>
              draft(cmd, 'step.output', now, { stream: c.stream, text: c.text, streamSeq: c.streamSeq }, workerId),
            ),
            writes: [writes.updateExecution(next, ['running'], workerId)],
          },
        };
      });
    }
  }

  /**
   * Resumes the interpreter on a step this result completed, with the token its command carried;
   * when that task is gone (its Dispatch re-attached since, with a new token), with the token on
   * the step's aggregate. Losing this resume costs the reconciler's lost-resume rule, not the run.
   */
  async function resume(cmd: StepCommand, taskToken: string, succeeded: boolean): Promise<void> {
    const output = completionOutput(cmd, { succeeded: succeeded ? 1 : 0, failed: succeeded ? 0 : 1 });
    if (await deps.callbacks.succeed(taskToken, output)) return;
    const aggregate = await runs.aggregate(cmd.runId, cmd.kind, cmd.stepId, cmd.attempt);
    if (aggregate && aggregate.taskToken !== taskToken) await deps.callbacks.succeed(aggregate.taskToken, output);
  }

  return {
    /**
     * `store` with its `acquireLease` handing each lease taken to this writer, so the records
     * that follow start from the leased execution instead of reading it back. A first attempt
     * it leased has no receipt to look up: a receipt is written in the same transaction as the
     * end of an execution with its key, and the first one with that key has not ended.
     */
    holdingLeases<S extends Pick<RunStore, 'acquireLease' | 'receipt'>>(store: S): S {
      const firstAttempts = new Set<string>();
      return {
        ...store,
        async acquireLease(runId, executionId, owner, now, leaseMs): Promise<LeaseOutcome> {
          const outcome = await store.acquireLease(runId, executionId, owner, now, leaseMs);
          if (outcome.claim === 'lease') {
            held.set(executionId, { execution: outcome.execution });
            if (outcome.execution.attempt === 1) firstAttempts.add(outcome.execution.idempotencyKey);
          }
          return outcome;
        },
        async receipt(key): Promise<Receipt | undefined> {
          if (firstAttempts.delete(key)) return undefined;
          return store.receipt(key);
        },
      };
    },

    /** leased -> running, with `step.started` and the ids of the secrets the step uses. */
    async started(cmd: StepCommand, workerId: string, secretsUsed: readonly string[] = []): Promise<void> {
      const now = deps.clock.now().toISOString();
      await record(cmd, (execution) => {
        const next: StepExecution = { ...execution, status: 'running', startedAt: now, secretsUsed: [...secretsUsed] };
        return {
          next,
          change: {
            events: [
              draft(
                cmd,
                'step.started',
                now,
                {
                  kind: cmd.kind,
                  attempt: cmd.attempt,
                  backend: cmd.backend,
                  action: cmd.action,
                  ...(secretsUsed.length > 0 && { secretsUsed: [...secretsUsed] }),
                },
                workerId,
              ),
            ],
            writes: [writes.updateExecution(next, ['leased'], workerId)],
          },
        };
      });
    },

    output,

    /**
     * Ends the execution: its final state, the receipt (on success), the aggregate count and
     * `step.succeeded` / `step.failed`; then, if that completed the step, resumes the interpreter.
     */
    async finished(
      cmd: StepCommand,
      workerId: string,
      result: Outcome,
      lastOutput: readonly OutputLine[] = [],
    ): Promise<void> {
      // The last lines the step printed commit with its result, in one transaction, when they are
      // few: a short step costs one write less. More go first, as output of their own.
      const bytes = lastOutput.reduce((total, line) => total + Buffer.byteLength(line.text), 0);
      const merged = lastOutput.length <= LAST_OUTPUT_LINES && bytes <= LAST_OUTPUT_BYTES ? lastOutput : [];
      if (merged.length < lastOutput.length) await output(cmd, workerId, lastOutput);
      const now = deps.clock.now().toISOString();
      const succeeded = result.outcome === 'succeeded';
      const unit = countsInto(cmd);
      // In a pipeline phase the target goes on to its next sub-step, or leaves the phase counted.
      const pipeline = cmd.pipeline && deps.fanout ? await pipelineStep(cmd, result) : undefined;
      const next =
        pipeline?.next.kind === 'run' && cmd.target
          ? newExecution(
              cmd,
              pipeline.next.rollback ? 'rollback' : 'step',
              pipeline.next.stepId,
              pipeline.next.attempt,
              cmd.target,
              now,
              {
                head: unit.stepId,
                failedBefore: pipeline.next.failedBefore,
              },
            )
          : undefined;
      const counted = pipeline?.next.kind === 'done' ? pipeline.next.succeeded : succeeded;
      const receiptNeeded = succeeded && !result.fromReceipt;
      const violation = result.outcome !== 'succeeded' && result.error.code === 'SANDBOX_VIOLATION';
      // A step of one execution whose command carries the interpreter's token completes with this
      // result, in the same transaction: no claim afterwards.
      const completes = cmd.taskToken !== undefined && !fannedOut(cmd);
      await record(cmd, (execution) => {
        const ended: StepExecution = {
          ...execution,
          status: result.outcome,
          endedAt: now,
          ...(merged.length > 0 && {
            outputTail: [...execution.outputTail, ...merged.map((c) => c.text)].slice(-OUTPUT_TAIL_LINES),
          }),
          ...(result.outcome !== 'succeeded' && { error: result.error }),
        };
        return {
          next: ended,
          change: {
            events: [
              ...merged.map((c) =>
                draft(cmd, 'step.output', now, { stream: c.stream, text: c.text, streamSeq: c.streamSeq }, workerId),
              ),
              ...(violation
                ? [
                    draft(
                      cmd,
                      'sandbox.violation',
                      now,
                      {
                        backend: cmd.backend,
                        action: cmd.action,
                        sandboxProfile: cmd.sandboxProfile,
                        enforcedBy: 'worker',
                        reason: result.error.message,
                      },
                      workerId,
                    ),
                  ]
                : []),
              draft(
                cmd,
                succeeded ? 'step.succeeded' : 'step.failed',
                now,
                {
                  kind: cmd.kind,
                  attempt: cmd.attempt,
                  ...(succeeded
                    ? { output: result.output ?? {}, fromReceipt: result.fromReceipt ?? false }
                    : { outcome: result.outcome, error: result.error }),
                },
                workerId,
              ),
            ],
            writes: [
              writes.updateExecution(ended, ['leased', 'running'], workerId),
              next
                ? writes.putExecution(next)
                : writes.countResult(cmd.runId, unit.kind, unit.stepId, unit.attempt, counted, completes),
              ...(receiptNeeded
                ? [
                    writes.putReceipt({
                      key: cmd.idempotencyKey,
                      executionId: cmd.executionId,
                      outcome: 'succeeded',
                      output: result.output ?? {},
                      recordedAt: now,
                    }),
                  ]
                : []),
            ],
          },
        };
      });
      // The execution has ended: nothing more is recorded about it.
      // A staged result leaves no fresher run than the one the pipeline's next step was decided on.
      const after = pipeline?.record;
      held.delete(cmd.executionId);
      lanes.delete(cmd.executionId);
      if (next && pipeline && after) await deps.fanout?.send(after, pipeline.runbook, [next]);
      const ref = { runId: cmd.runId, stepKind: unit.kind, stepId: unit.stepId, attempt: unit.attempt };
      if (deps.fanout && (cmd.target || cmd.pipeline)) {
        // Only a result that leaves every target counted can complete the unit: the others skip the claim.
        const full = next ? false : await deps.fanout.release(cmd.runId, ref, after);
        if (full) await deps.fanout.complete(cmd.runId, ref);
        return;
      }
      const resuming = completes && cmd.taskToken ? resume(cmd, cmd.taskToken, counted) : claimAndResume(deps, cmd);
      if (deps.later) deps.later.run('resume', resuming);
      else await resuming;
    },
  };
}

export type StepResults = ReturnType<typeof makeStepResults>;

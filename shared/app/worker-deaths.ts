import type { Run, StepExecution } from '../domain/entities.js';
import type { LostVerdict } from '../domain/recovery.js';
import { allSteps } from '../domain/runbook.js';
import { stepExecutionStateMachine } from '../domain/statuses.js';
import type { Clock, RunbookStore, WorkerStore } from './ports.js';
import type { RecoverLost } from './recovery.js';
import { runbookOf } from './runs.js';

/** The step executions and leases a worker's death is recovered from. */
export interface LeaseHolders {
  /** Step executions whose lease runs out before `until`, oldest first. */
  expiredLeases(until: Date, limit?: number): Promise<Array<{ runId: string; executionId: string }>>;
  execution(runId: string, executionId: string): Promise<StepExecution | undefined>;
  /** Moves the lease's end to `until`; false when `owner` no longer holds it. */
  renewLease(runId: string, executionId: string, owner: string, until: Date): Promise<boolean>;
  load(runId: string): Promise<{ readonly run: Pick<Run, 'tenantId' | 'runbookId' | 'runbookVersion'> } | undefined>;
}

export interface WorkerDeathDeps {
  readonly workers: WorkerStore;
  readonly runs: LeaseHolders;
  readonly runbooks: RunbookStore;
  readonly recover: RecoverLost;
  readonly clock: Clock;
  readonly log: (message: string, fields?: Record<string, unknown>) => void;
}

/** Which worker died, as the platform names it: its ECS task, or (locally) its host and process. */
export type DeadWorker =
  | { readonly taskArn: string; readonly how: string }
  | { readonly hostname: string; readonly pid: number; readonly how: string };

/** The most leases looked through for the dead worker's; each worker holds one at a time. */
const LEASE_SCAN_LIMIT = 1000;

/**
 * Reacts to a worker's death where the platform reports it (an ECS task that stopped, a local
 * process that exited without draining), instead of waiting for its lease to lapse: declares the
 * worker dead, ends each lease it held at once, and ends each of those step executions by the
 * recovery rule every finder applies (`makeRecoverLost`), so the step gets its next attempt now.
 * A drained worker has deregistered and holds nothing: its stop changes nothing. The lease stays
 * the backstop for deaths nobody reports.
 *
 * Input: the dead worker. Output: the verdict applied to each step execution it held.
 */
export function makeWorkerDied(deps: WorkerDeathDeps) {
  const { runs, workers } = deps;

  /** The action a lost execution was running, from its run's runbook (undefined: not safe to retry). */
  async function lostAction(lost: StepExecution) {
    const record = await runs.load(lost.runId);
    if (!record) return undefined;
    const step = allSteps(await runbookOf(deps.runbooks, record.run)).find((s) => s.step.id === lost.stepId)?.step;
    return lost.kind === 'rollback' ? step?.rollback : step;
  }

  return async function workerDied(dead: DeadWorker): Promise<LostVerdict[]> {
    const matches = (await workers.list()).filter((w) =>
      'taskArn' in dead ? w.taskArn === dead.taskArn : w.hostname === dead.hostname && w.pid === dead.pid,
    );
    const verdicts: LostVerdict[] = [];
    for (const worker of matches) {
      if (worker.status === 'deregistered') continue;
      if (await workers.setStatus(worker.workerId, 'dead'))
        deps.log('worker died', { workerId: worker.workerId, how: dead.how });
      const now = deps.clock.now();
      const leased = await runs.expiredLeases(new Date(now.getTime() + 86_400_000), LEASE_SCAN_LIMIT);
      for (const { runId, executionId } of leased) {
        const held = await runs.execution(runId, executionId);
        if (!held || held.leaseOwner !== worker.workerId || stepExecutionStateMachine.isTerminal(held.status)) continue;
        // The holder is gone: its lease ends now, so the recovery rule may end the execution.
        const ended = new Date(now.getTime() - 1);
        if (!(await runs.renewLease(runId, executionId, worker.workerId, ended))) continue;
        const verdict = await deps.recover(
          { ...held, leaseExpiresAt: ended.toISOString() },
          await lostAction(held),
          now,
          dead.how,
        );
        if (!verdict) continue;
        verdicts.push(verdict);
        deps.log('lease of a dead worker recovered', {
          runId,
          executionId,
          workerId: worker.workerId,
          verdict: verdict.kind,
        });
      }
    }
    return verdicts;
  };
}

export type WorkerDied = ReturnType<typeof makeWorkerDied>;

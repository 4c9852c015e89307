import type { Run, StepExecution } from '../domain/entities.js';
import type { Runbook } from '../domain/runbook.js';
import { runStateMachine, stepExecutionStateMachine } from '../domain/statuses.js';
import type { Aggregate } from '../domain/step-records.js';
import type { StepView, TargetView } from './run-reasons.js';

const ended = (status: Run['status']) => runStateMachine.isTerminal(status);

/**
 * The per-step view of a run from its executions and aggregates. A step with a target lists
 * every node it resolved to: each with its latest execution (a retry runs only the targets that
 * failed), `waiting` while rate control holds it, or `skipped` when it never started.
 */
export function stepViews(
  runbook: Runbook,
  run: Run,
  executions: readonly StepExecution[],
  aggregates: readonly Aggregate[] = [],
): StepView[] {
  return runbook.phases.flatMap((phase) =>
    phase.steps.map((step): StepView => {
      const mine = executions.filter((e) => e.stepId === step.id && e.kind === 'step');
      const attempts = mine.reduce((max, e) => Math.max(max, e.attempt), 0);
      const unitId = phase.mode === 'pipeline' ? (phase.steps[0]?.id ?? step.id) : step.id;
      const units = aggregates.filter((a) => a.kind === 'step' && a.stepId === unitId);
      const first = units.find((a) => a.attempt === 1);
      const expected = first?.targets?.map((t) => t.id);
      const latestOf = new Map<string, StepExecution>();
      for (const e of mine) {
        const known = latestOf.get(e.targetId);
        if (!known || e.attempt > known.attempt) latestOf.set(e.targetId, e);
      }
      const unitOpen = units.some((a) => !a.completed);
      const targets: TargetView[] = (expected ?? [...latestOf.keys()]).map((id) => {
        const e = latestOf.get(id);
        if (!e)
          return {
            id,
            targetId: id,
            status: unitOpen && !ended(run.status) ? 'waiting' : 'skipped',
            attempt: 0,
            outputTail: [],
          };
        return {
          id,
          targetId: id,
          status: e.status,
          attempt: e.attempt,
          ...(e.startedAt && { startedAt: e.startedAt }),
          ...(e.endedAt && { endedAt: e.endedAt }),
          outputTail: e.outputTail,
          ...(e.error && { error: e.error }),
          ...(e.leaseOwner && { workerId: e.leaseOwner }),
          ...(e.secretsUsed.length > 0 && { secretsUsed: e.secretsUsed }),
        };
      });
      const counts: Record<string, number> = {};
      for (const t of targets) counts[t.status] = (counts[t.status] ?? 0) + 1;
      const started = targets.filter((t) => t.status !== 'waiting' && t.status !== 'skipped');
      const refused = units.find((a) => a.error);
      const tolerated = units.at(-1)?.limits?.tolerated ?? 0;
      const failures = started.filter((t) => t.status !== 'succeeded').length + (counts.skipped ?? 0);
      const status: StepView['status'] =
        refused && started.length === 0
          ? 'failed'
          : targets.length === 0
            ? ended(run.status) || (units.length > 0 && !unitOpen)
              ? 'skipped'
              : 'pending'
            : started.some((t) => !stepExecutionStateMachine.isTerminal(t.status as StepExecution['status'])) ||
                (unitOpen && targets.some((t) => t.status === 'waiting'))
              ? 'running'
              : started.length === 0
                ? ended(run.status)
                  ? 'skipped'
                  : 'pending'
                : started.every((t) => t.status === 'cancelled')
                  ? 'cancelled'
                  : failures <= tolerated && !counts.skipped
                    ? 'succeeded'
                    : 'failed';
      const rollback = executions.find((e) => e.stepId === step.id && e.kind === 'rollback');
      return {
        id: step.id,
        phase: phase.id,
        backend: step.backend,
        action: step.action,
        status,
        attempts,
        ...(expected && { expected, counts }),
        targets,
        ...(rollback && { rollback: { status: rollback.status } }),
      };
    }),
  );
}

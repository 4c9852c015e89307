import type { Run } from './entities.js';
import type { PlanDecision } from './planner.js';
import { allSteps, type Runbook } from './runbook.js';

/** `backend.action` of a step, for people reading an approval. */
export function proposedAction(runbook: Runbook, stepId: string): string {
  const step = allSteps(runbook).find((s) => s.step.id === stepId)?.step;
  return step ? `${step.backend}.${step.action}` : 'unknown';
}

/** The decision that stands for a run that has ended. */
export function terminalDecision(run: Run): PlanDecision {
  if (run.status === 'succeeded') return { action: 'succeed' };
  if (run.status === 'cancelled') return { action: 'cancelled' };
  return {
    action: 'fail',
    error: { code: run.error?.code ?? 'FAILED', message: run.error?.message ?? 'the run failed' },
    rolledBack: [],
  };
}

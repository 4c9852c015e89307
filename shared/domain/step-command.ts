import type { Json } from './canonical.js';
import { durationMs } from './duration.js';
import type { Run, StepExecution } from './entities.js';
import type { StepCommand } from './messages.js';
import type { Runbook, Step } from './runbook.js';
import { substitute } from './template.js';

/** The command for one step (or its rollback) on one target, with the run's inputs substituted. */
export function commandFor(
  runbook: Runbook,
  run: Run,
  step: Step,
  execution: StepExecution,
  /** For a step of one execution: the task waiting on it and the chain head it was sent on. */
  single?: Pick<StepCommand, 'taskToken' | 'chainHead'>,
): StepCommand {
  const body = execution.kind === 'rollback' && step.rollback ? step.rollback : step;
  const params = substitute(body.params as Json, run.inputs, execution.target) as Record<string, Json>;
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
    priority: run.priority,
    ...(execution.target && { target: execution.target }),
    ...(execution.pipeline && { pipeline: execution.pipeline }),
    ...(single?.taskToken !== undefined && { taskToken: single.taskToken }),
    ...(single?.chainHead !== undefined && { chainHead: single.chainHead }),
  };
}

/** The id of one step attempt's execution on one target. */
export function executionIdOf(
  runId: string,
  kind: 'step' | 'rollback',
  stepId: string,
  attempt: number,
  targetId: string,
): string {
  return `${runId}.${kind}.${stepId}.${attempt}.${targetId}`;
}

/** The target id of a step that has no target: it runs once, on any worker of the profile. */
export const ONCE = 'once';

import { z } from 'zod';
import type { Planned } from '../../shared/app/plan.js';
import type { CarriedRun } from '../../shared/app/ports/runs.js';
import { runSchema } from '../../shared/domain/entities.js';
import { type PlanDecision, planDecisionSchema } from '../../shared/domain/planner.js';

/** The run as Plan decided on it, carried in the interpreter's state (`RunLog.carry`). */
export const carriedRunSchema = z.object({
  record: z.object({
    run: runSchema,
    head: z.object({ seq: z.number().int().min(0), hash: z.string().min(1) }),
    rollbackRequested: z.boolean(),
    executionArn: z.string().optional(),
  }),
  revision: z.number().int().nullable(),
});

/** What the interpreter passes a waiting task (`.waitForTaskToken`): the run, Plan's decision, the token. */
export const waitingTaskInputSchema = z.object({
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  decision: planDecisionSchema,
  taskToken: z.string().min(1),
  /**
   * Dispatch's: Plan's whole result, with the run it carried (null when too large to carry). Passed
   * whole so an execution whose Plan ran on an earlier definition, without `carried`, still resumes.
   */
  plan: z.object({ carried: z.unknown().optional() }).optional(),
});

/**
 * The run Plan carried to Dispatch, if it is one of this run in this tenant; anything else (nothing
 * carried, a record that does not parse, another run's) is dropped, and Dispatch reads the run.
 */
export function carriedFor(input: z.infer<typeof waitingTaskInputSchema>): CarriedRun | undefined {
  const parsed = carriedRunSchema.safeParse(input.plan?.carried);
  if (!parsed.success) return undefined;
  const { run } = parsed.data.record;
  return run.runId === input.runId && run.tenantId === input.tenantId ? parsed.data : undefined;
}

/**
 * Plan's result as the state machine reads it: `{ decision, carried }` (carried null when there is
 * none, since its ResultSelector needs the field) for a definition that asks with `carry`, and the
 * decision alone for an execution started on an earlier one.
 */
export function planResult(
  planned: Planned,
  carry: boolean,
): PlanDecision | { decision: PlanDecision; carried: CarriedRun | null } {
  return carry ? { decision: planned.decision, carried: planned.carried ?? null } : planned.decision;
}

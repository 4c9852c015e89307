import { z } from 'zod';
import type { Planned } from '../../shared/app/plan.js';
import type { CarriedRun } from '../../shared/app/ports/runs.js';
import { runSchema } from '../../shared/domain/entities.js';
import { chainHeadSchema } from '../../shared/domain/events.js';
import { type PlanDecision, planDecisionSchema } from '../../shared/domain/planner.js';

/** The run as Plan decided on it, carried in the interpreter's state (`RunLog.carry`). */
export const carriedRunSchema = z.object({
  record: z.object({
    run: runSchema,
    head: chainHeadSchema,
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
});
export type WaitingTaskInput = z.infer<typeof waitingTaskInputSchema>;

/**
 * Plan's result, as the state machine keeps it (`$.plan.decision`) and every task reads it: the
 * decision, with the run Plan carried beside its fields when there is one (only a dispatch).
 */
export function planResult(planned: Planned): PlanDecision | (PlanDecision & { carried: CarriedRun }) {
  return planned.carried ? { ...planned.decision, carried: planned.carried } : planned.decision;
}

const carryingInputSchema = z.looseObject({ decision: z.looseObject({ carried: z.unknown().optional() }) });

/**
 * Dispatch's input: the waiting task's, and the run Plan carried beside the decision's fields if it
 * is one of this run in this tenant. Anything else carried (a record that does not parse, another
 * run's) is dropped, and Dispatch reads the run; `dropped` says so.
 */
export function dispatchInputOf(event: unknown): {
  input: WaitingTaskInput;
  carried: CarriedRun | undefined;
  dropped: boolean;
} {
  const raw = carryingInputSchema.safeParse(event);
  const { carried: offered, ...decision } = raw.success ? raw.data.decision : { carried: undefined };
  const input = waitingTaskInputSchema.parse(raw.success ? { ...raw.data, decision } : event);
  return { input, ...carriedRunOf(offered, input.runId, input.tenantId) };
}

/**
 * The run a task was offered in the interpreter's state, if it parses and is this run in this
 * tenant. Anything else offered is dropped (the task reads the run), and `dropped` says so;
 * nothing offered (absent or null) is not a drop.
 */
export function carriedRunOf(
  offered: unknown,
  runId: string,
  tenantId: string,
): { carried: CarriedRun | undefined; dropped: boolean } {
  if (offered === undefined || offered === null) return { carried: undefined, dropped: false };
  const parsed = carriedRunSchema.safeParse(offered);
  const run = parsed.success ? parsed.data.record.run : undefined;
  const carried = parsed.success && run?.runId === runId && run.tenantId === tenantId ? parsed.data : undefined;
  return { carried, dropped: carried === undefined };
}

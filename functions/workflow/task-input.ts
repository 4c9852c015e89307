import { z } from 'zod';
import { runSchema } from '../../shared/domain/entities.js';
import { planDecisionSchema } from '../../shared/domain/planner.js';

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
  plan: z.object({ carried: carriedRunSchema.nullish() }).optional(),
});

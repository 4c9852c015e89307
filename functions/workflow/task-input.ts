import { z } from 'zod';
import { planDecisionSchema } from '../../shared/domain/planner.js';

/** What the interpreter passes a waiting task (`.waitForTaskToken`): the run, Plan's decision, the token. */
export const waitingTaskInputSchema = z.object({
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  decision: planDecisionSchema,
  taskToken: z.string().min(1),
});

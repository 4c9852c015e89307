import { z } from 'zod';
import { makeDispatch } from '../../shared/app/interpreter.js';
import { planDecisionSchema } from '../../shared/domain/planner.js';
import { interpreterDeps } from '../dependencies.js';

const dispatch = makeDispatch(interpreterDeps());
const inputSchema = z.object({
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  decision: planDecisionSchema,
  taskToken: z.string().min(1),
});

/** The interpreter's Dispatch task (`.waitForTaskToken`): queues the step; a worker's result resumes it. */
export const handler = async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = inputSchema.parse(event);
  if (decision.action !== 'dispatch') throw new Error(`Dispatch got a '${decision.action}' decision`);
  await dispatch(runId, decision, taskToken);
};

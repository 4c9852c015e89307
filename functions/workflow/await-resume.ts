import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { makeAwaitResume } from '../../shared/app/approvals.js';
import { approvalDeps } from '../dependencies.js';

const logger = new Logger({ serviceName: 'capstan-await-resume' });
const awaitResume = makeAwaitResume(approvalDeps());
const inputSchema = z.object({
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  decision: z.object({ action: z.literal('pause'), reason: z.string() }),
  taskToken: z.string().min(1),
});

/**
 * The interpreter's Paused task (`.waitForTaskToken`): keeps the token with the run; an operator's
 * `POST /v1/runs/{id}/resume` sends it, and the interpreter plans again from the stored state.
 */
export const handler = async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = inputSchema.parse(event);
  await awaitResume(runId, taskToken);
  logger.info('run paused for an operator', { runId, reason: decision.reason });
};

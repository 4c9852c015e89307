import { Logger } from '@aws-lambda-powertools/logger';
import { makeAwaitResume } from '../../shared/app/approvals.js';
import { approvalDeps } from '../dependencies.js';
import { waitingTaskInputSchema } from './task-input.js';

const logger = new Logger({ serviceName: 'capstan-await-resume' });
const awaitResume = makeAwaitResume(approvalDeps());

/**
 * The interpreter's Paused task (`.waitForTaskToken`): keeps the token with the run; an operator's
 * `POST /v1/runs/{id}/resume` sends it, and the interpreter plans again from the stored state.
 */
export const handler = async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = waitingTaskInputSchema.parse(event);
  if (decision.action !== 'pause') throw new Error(`Paused got a '${decision.action}' decision`);
  await awaitResume(runId, taskToken);
  logger.info('run paused for an operator', { runId, reason: decision.reason });
};

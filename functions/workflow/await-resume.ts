import { makeAwaitResume } from '../../shared/app/approvals.js';
import { approvalDeps } from '../dependencies.js';
import { lambdaTelemetry } from '../observability.js';
import { waitingTaskInputSchema } from './task-input.js';

const { logger, observe } = lambdaTelemetry('capstan-await-resume');
const awaitResume = makeAwaitResume(approvalDeps());

/**
 * The interpreter's Paused task (`.waitForTaskToken`): keeps the token with the run; an operator's
 * `POST /v1/runs/{id}/resume` sends it, and the interpreter plans again from the stored state.
 */
export const handler = observe(async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = waitingTaskInputSchema.parse(event);
  if (decision.action !== 'pause') throw new Error(`Paused got a '${decision.action}' decision`);
  await awaitResume(runId, taskToken);
  logger.info('run paused for an operator', { runId, reason: decision.reason });
});

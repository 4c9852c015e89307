import { makeAwaitApproval } from '../../shared/app/approvals.js';
import { approvalDeps } from '../dependencies.js';
import { lambdaTelemetry } from '../observability.js';
import { waitingTaskInputSchema } from './task-input.js';

const { logger, observe } = lambdaTelemetry('capstan-await-approval');
const awaitApproval = makeAwaitApproval(approvalDeps());

/**
 * The interpreter's AwaitApproval task (`.waitForTaskToken`, timing out at the gate's SLA or hard
 * limit): keeps the token for the decision that resolves the gate.
 */
export const handler = observe(async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = waitingTaskInputSchema.parse(event);
  if (decision.action !== 'await_approval') throw new Error(`AwaitApproval got a '${decision.action}' decision`);
  await awaitApproval(runId, decision.approvalId, taskToken);
  logger.info('waiting for approval', {
    runId,
    approvalId: decision.approvalId,
    timeoutSeconds: decision.timeoutSeconds,
  });
});

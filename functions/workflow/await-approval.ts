import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { makeAwaitApproval } from '../../shared/app/approvals.js';
import { planDecisionSchema } from '../../shared/domain/planner.js';
import { approvalDeps } from '../dependencies.js';

const logger = new Logger({ serviceName: 'capstan-await-approval' });
const awaitApproval = makeAwaitApproval(approvalDeps());
const inputSchema = z.object({
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  decision: planDecisionSchema,
  taskToken: z.string().min(1),
});

/**
 * The interpreter's AwaitApproval task (`.waitForTaskToken`, timing out at the gate's SLA or hard
 * limit): keeps the token for the decision that resolves the gate.
 */
export const handler = async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = inputSchema.parse(event);
  if (decision.action !== 'await_approval') throw new Error(`AwaitApproval got a '${decision.action}' decision`);
  await awaitApproval(runId, decision.approvalId, taskToken);
  logger.info('waiting for approval', {
    runId,
    approvalId: decision.approvalId,
    timeoutSeconds: decision.timeoutSeconds,
  });
};

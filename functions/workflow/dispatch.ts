import { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';
import { makeDispatch } from '../../shared/app/dispatch.js';
import { interpreterDeps, inventoryStore } from '../dependencies.js';
import { waitingTaskInputSchema } from './task-input.js';

const logger = new Logger({ serviceName: 'capstan-dispatch' });
const metrics = new Metrics({ namespace: 'Capstan', serviceName: 'capstan-dispatch' });
const dispatch = makeDispatch({
  ...interpreterDeps(),
  inventory: inventoryStore(),
  onViolation: (violation) => {
    logger.warn('sandbox violation refused at dispatch', violation);
    metrics.addDimensions({ sandboxProfile: violation.profile, enforcedBy: 'dispatcher' });
    metrics.addMetric('SandboxViolations', MetricUnit.Count, 1);
    metrics.publishStoredMetrics();
  },
});

/** The interpreter's Dispatch task (`.waitForTaskToken`): queues the step; a worker's result resumes it. */
export const handler = async (event: unknown): Promise<void> => {
  const { runId, decision, taskToken } = waitingTaskInputSchema.parse(event);
  if (decision.action !== 'dispatch') throw new Error(`Dispatch got a '${decision.action}' decision`);
  await dispatch(runId, decision, taskToken);
};

import { makeDispatch } from '../../shared/app/dispatch.js';
import { interpreterDeps, inventoryStore } from '../dependencies.js';
import { recordMetric } from '../../shared/observability/metrics.js';
import { lambdaTelemetry } from '../observability.js';
import { dispatchInputOf } from './task-input.js';

const { logger, observe } = lambdaTelemetry('capstan-dispatch');
const dispatch = makeDispatch({
  ...interpreterDeps(),
  inventory: inventoryStore(),
  onViolation: (violation) => {
    logger.warn('sandbox violation refused at dispatch', violation);
    recordMetric('sandboxViolations', 1, { sandboxProfile: violation.profile, enforcedBy: 'dispatcher' });
  },
});

/** The interpreter's Dispatch task (`.waitForTaskToken`): queues the step; a worker's result resumes it. */
export const handler = observe(async (event: unknown): Promise<void> => {
  const { input, carried, dropped } = dispatchInputOf(event);
  const { runId, decision, taskToken } = input;
  if (decision.action !== 'dispatch') throw new Error(`Dispatch got a '${decision.action}' decision`);
  if (dropped) logger.warn('the run Plan carried is not this run: reading it', { runId });
  await dispatch(runId, decision, taskToken, carried);
});

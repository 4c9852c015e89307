import { emptySummary, makeReconcile, type ReconcileSummary } from '../shared/app/reconciler.js';
import { config } from '../shared/config.js';
import { sqsClient } from '../shared/adapters/aws-clients.js';
import { makeSqsQueueDepths } from '../shared/adapters/sqs/queue-depth.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeConnectionStore } from '../shared/adapters/dynamodb/connection-store.js';
import { SANDBOX_PROFILE_NAMES } from '../shared/domain/sandbox-profiles.js';
import { recordReconcileSummary, recordMetric } from '../shared/observability/metrics.js';
import { reconcilerDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-reconciler');
const queueDepths = makeSqsQueueDepths(sqsClient(), config().CAPSTAN_PREFIX, SANDBOX_PROFILE_NAMES);
const connections = makeConnectionStore(documentClient, config().CAPSTAN_CONNECTIONS_TABLE);
const reconcile = makeReconcile({ ...reconcilerDeps(), log: (message, fields) => logger.info(message, fields ?? {}) });

/** Sweeps per invocation, spread over the minute between scheduled invocations. */
const SWEEPS = config().CAPSTAN_RECONCILE_SWEEPS;
const SWEEP_SPACING_MS = 20_000;

/**
 * The scheduled reconciler. EventBridge invokes it once a minute; it sweeps `SWEEPS` times, 20 s
 * apart, so a lost step execution waits at most about 20 s after its lease expires.
 */
export const handler = observe(async (): Promise<ReconcileSummary> => {
  const total = emptySummary();
  try {
    for (let sweep = 0; sweep < SWEEPS; sweep++) {
      if (sweep > 0) await new Promise((resolve) => setTimeout(resolve, SWEEP_SPACING_MS));
      const summary = await reconcile();
      for (const key of Object.keys(total) as Array<keyof ReconcileSummary>) {
        // Stuck runs are a count at one moment, not work done: the latest sweep's count stands.
        total[key] = key === 'stuckRuns' ? summary[key] : total[key] + summary[key];
      }
    }
  } catch (error) {
    recordMetric('reconcilerFailures', 1, {});
    throw error;
  }
  recordReconcileSummary(total);
  // The queue depth by profile and the open WebSocket sessions, once a minute beside the sweep.
  try {
    for (const [profile, depth] of await queueDepths.depths())
      recordMetric('queueDepth', depth, { sandboxProfile: profile });
    recordMetric('websocketSessions', await connections.countOpen(new Date()), {});
  } catch (error) {
    logger.warn('could not read the queue depths or the open sessions', { error: (error as Error).message });
  }
  logger.info('reconciled', { ...total });
  return total;
});

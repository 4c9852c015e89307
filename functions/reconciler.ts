import { emptySummary, makeReconcile, type ReconcileSummary } from '../shared/app/reconciler.js';
import { config } from '../shared/config.js';
import { reconcilerDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-reconciler');
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
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    if (sweep > 0) await new Promise((resolve) => setTimeout(resolve, SWEEP_SPACING_MS));
    const summary = await reconcile();
    for (const key of Object.keys(total) as Array<keyof ReconcileSummary>) total[key] += summary[key];
  }
  logger.info('reconciled', { ...total });
  return total;
});

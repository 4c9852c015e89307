import { makeReconcile } from '../../shared/app/reconciler.js';
import { recordReconcileSummary } from '../../shared/observability/metrics.js';
import { reconcilerDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';
import { lambdaTelemetry } from '../observability.js';

const telemetry = lambdaTelemetry('capstan-api');
const { logger } = telemetry;

const reconcile = makeReconcile({ ...reconcilerDeps(), log: (message, fields) => logger.info(message, fields ?? {}) });

/**
 * POST /v1/reconcile (admin): one reconciler sweep now, the same use case the schedule runs, and
 * its summary. Every repair is a conditional write, so a sweep racing the scheduled one is safe.
 */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const summary = await reconcile();
  recordReconcileSummary(summary);
  logger.info('reconciled on request', { ...summary, by: principal.subject });
  return { status: 200, body: summary };
}, telemetry);

import { makeDashboardMetrics } from '../../shared/app/dashboard.js';
import { dashboardDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const dashboardMetrics = makeDashboardMetrics(dashboardDeps());

/** GET /v1/dashboard/metrics: the tenant's runs by status, waiting approvals, recent failures; the fleet for the platform tenant. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  return { status: 200, body: await dashboardMetrics(principal) };
});

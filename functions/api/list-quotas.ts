import { makeQuotaControls } from '../../shared/app/admission-controls.js';
import { controlDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const quotas = makeQuotaControls(controlDeps());

/** GET /v1/quotas: the tenant's quotas. */
export const handler = httpHandler(async (request) => ({
  status: 200,
  body: { quotas: await quotas.list(requirePrincipal(request)) },
}));

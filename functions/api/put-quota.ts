import { makeQuotaControls } from '../../shared/app/admission-controls.js';
import { quotaPathSchema, quotaBodySchema } from '../../shared/resources/admission-schemas.js';
import { controlDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const quotas = makeQuotaControls(controlDeps());

/** PUT /v1/quotas/{id} (admin): sets the quota of a runbook, or of all with `*`. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = quotaPathSchema.parse(request.path);
  const body = parseJsonBody(request, quotaBodySchema);
  return { status: 200, body: await quotas.set(principal, id, body, false) };
});

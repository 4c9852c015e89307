import { makeQuotaControls } from '../../shared/app/admission-controls.js';
import { quotaPathSchema, quotaPatchSchema } from '../../shared/resources/admission-schemas.js';
import { controlDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const quotas = makeQuotaControls(controlDeps());

/** PATCH /v1/quotas/{id} (admin): changes the fields given. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = quotaPathSchema.parse(request.path);
  const body = parseJsonBody(request, quotaPatchSchema);
  return { status: 200, body: await quotas.set(principal, id, body, true) };
});

import { makeBreakerControls } from '../../shared/app/admission-controls.js';
import { breakerPathSchema, breakerResetBodySchema } from '../../shared/resources/admission-schemas.js';
import { admission, controlDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const breakers = makeBreakerControls(controlDeps());
const admit = admission();

/** POST /v1/breakers/{runbook}/reset: closes the breaker, then admits what it held back. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { runbook } = breakerPathSchema.parse(request.path);
  const body = request.body ? parseJsonBody(request, breakerResetBodySchema) : {};
  const breaker = await breakers.reset(principal, runbook, body.reason);
  await admit.admitBacklog(principal.tenantId);
  return { status: 200, body: breaker };
});

import { makeLimitControls } from '../../shared/app/admission-controls.js';
import { throttleBodySchema } from '../../shared/resources/admission-schemas.js';
import { controlDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const limits = makeLimitControls(controlDeps());

/** POST /v1/limits/throttle: throttles a runbook or trigger source; logged with the actor and reason. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  return { status: 200, body: await limits.throttle(principal, parseJsonBody(request, throttleBodySchema)) };
});

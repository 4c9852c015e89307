import { makeBreakerControls } from '../../shared/app/admission-controls.js';
import { controlDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const breakers = makeBreakerControls(controlDeps());

/** GET /v1/breakers: each runbook's circuit breaker. */
export const handler = httpHandler(async (request) => ({
  status: 200,
  body: { breakers: await breakers.list(requirePrincipal(request)) },
}));

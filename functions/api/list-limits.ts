import { makeLimitControls } from '../../shared/app/admission-controls.js';
import { controlDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const limits = makeLimitControls(controlDeps());

/** GET /v1/limits: paused and throttled sources. */
export const handler = httpHandler(async (request) => ({
  status: 200,
  body: { limits: await limits.list(requirePrincipal(request)) },
}));

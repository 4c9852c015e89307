import { makeLimitControls } from '../../shared/app/admission-controls.js';
import { pauseBodySchema } from '../../shared/resources/admission-schemas.js';
import { admission, controlDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const limits = makeLimitControls(controlDeps());
const admit = admission();

/** POST /v1/limits/resume: resumes a runbook or trigger source; logged with the actor and reason. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const resumed = await limits.resume(principal, parseJsonBody(request, pauseBodySchema));
  // What the pause held back goes now, not at the next scheduled pass.
  await admit.admitBacklog(principal.tenantId);
  return { status: 200, body: resumed };
});

import { makeResumeRun, resumeBodySchema } from '../../shared/app/approvals.js';
import { approvalDeps, runbookDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';

const resumeRun = makeResumeRun({ ...approvalDeps(), runbooks: runbookDeps.runbooks });

/** POST /v1/runs/{id}/resume `{"directive": "retry"|"rollback"|"cancel"}`: 202 for a paused run. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 202, body: await resumeRun(principal, id, parseJsonBody(request, resumeBodySchema)) };
});

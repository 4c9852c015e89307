import { makeRollbackRun } from '../../shared/app/runs.js';
import { runDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';

const rollbackRun = makeRollbackRun(runDeps());

/** POST /v1/runs/{id}/rollback: 202; the succeeded steps' rollbacks run newest first. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 202, body: await rollbackRun(principal, id) };
});

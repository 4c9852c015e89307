import { makeCancelRun } from '../../shared/app/runs.js';
import { runDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';

const cancelRun = makeCancelRun(runDeps());

/** POST /v1/runs/{id}/cancel: 202; the run ends `cancelled` once running step executions finish. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 202, body: await cancelRun(principal, id) };
});

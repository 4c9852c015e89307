import { makeGetRun } from '../../shared/app/runs.js';
import { runDeps } from '../dependencies.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';
import { httpHandler, requirePrincipal } from '../http.js';

const getRun = makeGetRun(runDeps());

/** GET /v1/runs/{id}: the run, its steps with per-target status, attempts and output tail. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 200, body: await getRun(principal, id) };
});

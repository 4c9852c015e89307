import { runPathSchema } from '../../shared/resources/api-schemas.js';
import { incidents } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const { acknowledge } = incidents();

/** POST /v1/runs/{id}/incident/ack: the operator acknowledges the run's incident (409 when there is none). */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 200, body: await acknowledge(principal, id) };
});

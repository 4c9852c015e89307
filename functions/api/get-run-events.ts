import { eventsQuerySchema, makeGetEvents } from '../../shared/app/runs.js';
import { runDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';

const getEvents = makeGetEvents(runDeps());

/** GET /v1/runs/{id}/events?since=&limit=: the run's events after `since`, in seq order. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 200, body: await getEvents(principal, id, eventsQuerySchema.parse(request.query)) };
});

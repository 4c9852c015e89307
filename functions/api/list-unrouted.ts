import { makeListUnrouted, unroutedQuerySchema } from '../../shared/app/intake.js';
import { intakeDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listUnrouted = makeListUnrouted(intakeDeps());

/** GET /v1/intake/unrouted: ticket events that started no run, newest first. */
export const handler = httpHandler(async (request) => {
  const page = await listUnrouted(requirePrincipal(request), unroutedQuerySchema.parse(request.query));
  return { status: 200, body: { tickets: page.items, ...(page.nextCursor && { nextCursor: page.nextCursor }) } };
});

import { makeListRunbooks } from '../../shared/app/runbooks.js';
import { runbookDeps } from '../dependencies.js';
import { listRunbooksQuerySchema } from '../../shared/resources/api-schemas.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listRunbooks = makeListRunbooks(runbookDeps);

/** GET /v1/runbooks?limit=&cursor= */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const query = listRunbooksQuerySchema.parse(request.query);
  const page = await listRunbooks({ principal, limit: query.limit, ...(query.cursor ? { cursor: query.cursor } : {}) });
  return { status: 200, body: page };
});

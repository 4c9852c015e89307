import { listRunsQuerySchema, makeListRuns } from '../../shared/app/runs.js';
import { runDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listRuns = makeListRuns(runDeps());

/** GET /v1/runs?status=&limit=&cursor= (newest first) */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const page = await listRuns(principal, listRunsQuerySchema.parse(request.query));
  return { status: 200, body: { runs: page.items, ...(page.nextCursor && { nextCursor: page.nextCursor }) } };
});

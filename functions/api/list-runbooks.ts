import { z } from 'zod';
import { makeListRunbooks } from '../../shared/app/runbooks.js';
import { runbookDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listRunbooks = makeListRunbooks(runbookDeps);
const querySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  cursor: z.string().optional(),
});

/** GET /v1/runbooks?limit=&cursor= */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const query = querySchema.parse(request.query);
  const page = await listRunbooks({ principal, limit: query.limit, ...(query.cursor ? { cursor: query.cursor } : {}) });
  return { status: 200, body: page };
});

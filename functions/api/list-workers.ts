import { listWorkersQuerySchema, makeListWorkers } from '../../shared/app/workers.js';
import { workerDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listWorkers = makeListWorkers(workerDeps());

/** GET /v1/workers?status=&profile=: registered workers with their status as of now. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  return { status: 200, body: { workers: await listWorkers(principal, listWorkersQuerySchema.parse(request.query)) } };
});

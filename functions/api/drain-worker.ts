import { makeDrainWorker, workerPathSchema } from '../../shared/app/workers.js';
import { workerDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const drainWorker = makeDrainWorker(workerDeps());

/** POST /v1/workers/{id}/drain: 202; the worker drains after its next heartbeat. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = workerPathSchema.parse(request.path);
  return { status: 202, body: await drainWorker(principal, id) };
});

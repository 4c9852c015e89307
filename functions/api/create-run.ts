import { createRunBodySchema, makeCreateRun } from '../../shared/app/runs.js';
import { runDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const createRun = makeCreateRun(runDeps());

/** POST /v1/runs (header Idempotency-Key): 202 with the run id and status. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const body = parseJsonBody(request, createRunBodySchema);
  const idempotencyKey = request.headers['idempotency-key'];
  const run = await createRun({ principal, body, ...(idempotencyKey !== undefined && { idempotencyKey }) });
  return { status: 202, body: { runId: run.runId, status: run.status } };
});

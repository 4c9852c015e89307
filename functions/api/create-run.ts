import { makeDryRun } from '../../shared/app/dry-run.js';
import { createRunBodySchema, makeCreateRun } from '../../shared/app/runs.js';
import { parsePolicy } from '../../shared/domain/policy.js';
import { config } from '../../shared/config.js';
import { inventoryStore, runDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const createRun = makeCreateRun(runDeps());
const dryRun = makeDryRun({
  runbooks: runDeps().runbooks,
  inventory: inventoryStore(),
  policy: parsePolicy(config().CAPSTAN_POLICY),
});

/** POST /v1/runs (header Idempotency-Key): 202 with the run id and status; 200 with the plan for a dry run. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const body = parseJsonBody(request, createRunBodySchema);
  if (body.dryRun === true) return { status: 200, body: await dryRun(principal, body) };
  const idempotencyKey = request.headers['idempotency-key'];
  const run = await createRun({ principal, body, ...(idempotencyKey !== undefined && { idempotencyKey }) });
  return { status: 202, body: { runId: run.runId, status: run.status } };
});

import { makeGetRunbook } from '../../shared/app/runbooks.js';
import { runbookDeps } from '../dependencies.js';
import { runbookPathSchema, runbookQuerySchema } from '../../shared/resources/api-schemas.js';
import { httpHandler, requirePrincipal } from '../http.js';

const getRunbook = makeGetRunbook(runbookDeps);

/** GET /v1/runbooks/{id}?version= (latest when no version is given) */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runbookPathSchema.parse(request.path);
  const { version } = runbookQuerySchema.parse(request.query);
  const runbook = await getRunbook({ principal, runbookId: id, ...(version === undefined ? {} : { version }) });
  return { status: 200, body: runbook };
});

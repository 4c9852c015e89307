import { z } from 'zod';
import { makeGetRunbook } from '../../shared/app/runbooks.js';
import { runbookDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const getRunbook = makeGetRunbook(runbookDeps);
const pathSchema = z.object({ id: z.string().min(1).max(63) });
const querySchema = z.strictObject({ version: z.coerce.number().int().positive().optional() });

/** GET /v1/runbooks/{id}?version= (latest when no version is given) */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = pathSchema.parse(request.path);
  const { version } = querySchema.parse(request.query);
  const runbook = await getRunbook({ principal, runbookId: id, ...(version === undefined ? {} : { version }) });
  return { status: 200, body: runbook };
});

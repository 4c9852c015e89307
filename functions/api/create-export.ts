import { createExportBodySchema, makeCreateExport } from '../../shared/app/exports.js';
import { evidenceDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const createExport = makeCreateExport(evidenceDeps());

/** POST /v1/exports: a signed bundle of every run of the tenant in the window; 201 with its id and digest. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  return { status: 201, body: await createExport(principal, parseJsonBody(request, createExportBodySchema)) };
});

import { exportPathSchema, makeGetExport } from '../../shared/app/exports.js';
import { evidenceDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const getExport = makeGetExport(evidenceDeps());

/** GET /v1/exports/{id}: an export of the caller's tenant, `application/gzip`. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = exportPathSchema.parse(request.path);
  return {
    status: 200,
    binary: {
      contentType: 'application/gzip',
      bytes: await getExport(principal, id),
      headers: { 'content-disposition': `attachment; filename="${id}.tar.gz"` },
    },
  };
});

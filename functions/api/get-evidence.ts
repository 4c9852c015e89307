import { makeGetEvidence } from '../../shared/app/evidence.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';
import { evidenceDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const getEvidence = makeGetEvidence(evidenceDeps());

/** GET /v1/runs/{id}/evidence: the finished run's signed bundle, `application/gzip`. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  const { body, sha256 } = await getEvidence(principal, id);
  return {
    status: 200,
    binary: {
      contentType: 'application/gzip',
      bytes: body,
      headers: { 'content-disposition': `attachment; filename="${id}.evidence.tar.gz"`, 'x-capstan-sha256': sha256 },
    },
  };
});

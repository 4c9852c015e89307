import { artifactPathSchema, makeGetArtifact } from '../../shared/app/artifacts.js';
import { evidenceDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const getArtifact = makeGetArtifact(evidenceDeps());

/** GET /v1/runs/{id}/artifacts/{name}: one artifact's bytes. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id, name } = artifactPathSchema.parse(request.path);
  const { record, body } = await getArtifact(principal, id, name);
  return {
    status: 200,
    binary: {
      contentType: 'application/octet-stream',
      bytes: body,
      headers: { 'content-disposition': `attachment; filename="${name}"`, 'x-capstan-sha256': record.sha256 },
    },
  };
});

import { makeListArtifacts } from '../../shared/app/artifacts.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';
import { evidenceDeps } from '../dependencies.js';
import { httpHandler, requirePrincipal } from '../http.js';

const listArtifacts = makeListArtifacts(evidenceDeps());

/** GET /v1/runs/{id}/artifacts: the files the run's steps stored, with size and sha256. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 200, body: await listArtifacts(principal, id) };
});

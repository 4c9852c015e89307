import { makeReplayRun, replayBodySchema } from '../../shared/app/replay.js';
import { runPathSchema } from '../../shared/resources/api-schemas.js';
import { runDeps } from '../dependencies.js';
import { httpHandler, parseJsonBody, requirePrincipal } from '../http.js';

const replayRun = makeReplayRun(runDeps());

/** POST /v1/runs/{id}/replay: 202 with the new run, which replays this one. */
export const handler = httpHandler(async (request) => {
  const principal = requirePrincipal(request);
  const { id } = runPathSchema.parse(request.path);
  return { status: 202, body: await replayRun(principal, id, parseJsonBody(request, replayBodySchema)) };
});

import { z } from 'zod';
import type { Principal } from '../domain/entities.js';
import { NotFoundError } from '../domain/errors.js';
import { artifactKey, artifactNameSchema } from '../domain/evidence/artifacts.js';
import { type ArtifactRecord, artifactsOf } from '../domain/evidence/bundle.js';
import { allEvents, visibleRecord } from './evidence.js';
import type { EvidenceDeps } from './evidence-ports.js';

export const artifactPathSchema = z.object({
  id: z.string().regex(/^run-[0-9a-f-]{36}$/, 'must be a run id'),
  name: artifactNameSchema,
});

/** GET /v1/runs/{id}/artifacts: what the run's steps stored, from its `artifact.stored` events. */
export function makeListArtifacts(deps: Pick<EvidenceDeps, 'runs'>) {
  return async function listArtifacts(principal: Principal, runId: string): Promise<{ artifacts: ArtifactRecord[] }> {
    await visibleRecord(deps.runs, principal, runId);
    return { artifacts: artifactsOf(await allEvents(deps.runs, runId)) };
  };
}

/** GET /v1/runs/{id}/artifacts/{name}: one artifact's bytes, as the step stored them. */
export function makeGetArtifact(deps: Pick<EvidenceDeps, 'runs' | 'objects'>) {
  return async function getArtifact(principal: Principal, runId: string, name: string) {
    const { run } = await visibleRecord(deps.runs, principal, runId);
    const record = artifactsOf(await allEvents(deps.runs, runId)).find((a) => a.name === name);
    const body = record && (await deps.objects.get(artifactKey(run.tenantId, runId, name)));
    if (!record || !body) throw new NotFoundError(`artifact '${name}' of run '${runId}' not found`);
    return { record, body };
  };
}

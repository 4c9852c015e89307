import { randomUUID } from 'node:crypto';
import type { RunStore } from '../shared/adapters/dynamodb/run-store.js';
import type { EvidenceObjects } from '../shared/app/evidence-ports.js';
import type { Clock } from '../shared/app/ports.js';
import { artifactKey, artifactNameSchema } from '../shared/domain/evidence/artifacts.js';
import type { ArtifactRecord } from '../shared/domain/evidence/bundle.js';
import { sha256Of } from '../shared/domain/evidence/manifest.js';
import type { StepCommand } from '../shared/domain/messages.js';
import { ActionError } from './backends/types.js';

export interface ArtifactStoreOptions {
  /** The evidence bucket. */
  readonly objects: Pick<EvidenceObjects, 'put'>;
  readonly maxBytes: number;
  readonly runs: Pick<RunStore, 'mutate'>;
  readonly clock: Clock;
}

/** Stores one artifact of the step execution a sink was made for. */
export type ArtifactSink = (name: string, body: Uint8Array) => Promise<ArtifactRecord>;

/**
 * Artifacts a step produces (seed 004 5.3): each is written to the evidence bucket under its run
 * (`artifacts/<tenant>/<run>/<name>`, encrypted by the bucket's key) and then recorded as an
 * `artifact.stored` event with its size and sha256, so the run's chain and its bundle carry the
 * digest. A name that is not a plain file name, or a body over the cap, fails the action (not
 * retryable: another attempt would produce the same).
 */
export function makeArtifactStore(options: ArtifactStoreOptions) {
  return {
    sinkFor(cmd: StepCommand, workerId: string): ArtifactSink {
      return async (name, body) => {
        if (!artifactNameSchema.safeParse(name).success)
          throw new ActionError('ARTIFACT_INVALID', `'${name}' is not a valid artifact name`, false);
        if (body.length > options.maxBytes)
          throw new ActionError(
            'ARTIFACT_TOO_LARGE',
            `artifact '${name}' is ${body.length} bytes, over the ${options.maxBytes}-byte limit`,
            false,
          );
        const record: ArtifactRecord = {
          name,
          stepId: cmd.stepId,
          targetId: cmd.targetId,
          size: body.length,
          sha256: sha256Of(body),
        };
        await options.objects.put(artifactKey(cmd.tenantId, cmd.runId, name), body, 'application/octet-stream');
        await options.runs.mutate(cmd.runId, () => ({
          events: [
            {
              eventId: randomUUID(),
              type: 'artifact.stored',
              timestamp: options.clock.now().toISOString(),
              stepId: cmd.stepId,
              targetId: cmd.targetId,
              payload: { name, size: record.size, sha256: record.sha256, kind: cmd.kind, attempt: cmd.attempt },
              meta: {
                workerId,
                sandboxProfile: cmd.sandboxProfile,
                ...(cmd.correlationId && { correlationId: cmd.correlationId }),
              },
            },
          ],
        }));
        return record;
      };
    },
  };
}
export type ArtifactStore = ReturnType<typeof makeArtifactStore>;

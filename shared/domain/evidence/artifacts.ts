import { z } from 'zod';

/** An artifact's name: a plain file name, so it is one path segment in a URL, a key and a tar. */
export const artifactNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be 1 to 100 letters, digits or . _ - (not starting with . _ -)');

/** Where a run's artifact is kept in the evidence bucket. */
export const artifactKey = (tenantId: string, runId: string, name: string) => `artifacts/${tenantId}/${runId}/${name}`;

/** The default cap on one artifact's size (`CAPSTAN_ARTIFACT_MAX_BYTES`). */
export const DEFAULT_ARTIFACT_MAX_BYTES = 1_048_576;

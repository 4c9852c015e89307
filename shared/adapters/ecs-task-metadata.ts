import { z } from 'zod';

const taskMetadataSchema = z.object({ TaskARN: z.string().min(1) });

/**
 * The ARN of the ECS task this process runs in, from the task metadata endpoint (v4) ECS sets in
 * every container; undefined outside ECS. A worker registers it so that the task's stop event
 * names the worker to recover at once.
 */
export async function ecsTaskArn(metadataUri: string | undefined): Promise<string | undefined> {
  if (metadataUri === undefined) return undefined;
  const response = await fetch(`${metadataUri}/task`, { signal: AbortSignal.timeout(5000) });
  if (!response.ok) throw new Error(`task metadata: HTTP ${response.status}`);
  return taskMetadataSchema.parse(await response.json()).TaskARN;
}

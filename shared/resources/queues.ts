import type { SandboxProfileName } from '../domain/sandbox-profiles.js';

/** Name of a sandbox profile's step queue; the same in AWS and locally. */
export function stepQueueName(prefix: string, profile: SandboxProfileName): string {
  return `${prefix}-${profile}-steps`;
}

/** Name of the dead-letter queue behind a profile's step queue. */
export function deadLetterQueueName(prefix: string, profile: SandboxProfileName): string {
  return `${prefix}-${profile}-steps-dlq`;
}

import { createHash } from 'node:crypto';
import type { SandboxProfileName } from '../domain/sandbox-profiles.js';

/** Name of a sandbox profile's step queue; the same in AWS and locally. */
export function stepQueueName(prefix: string, profile: SandboxProfileName): string {
  return `${prefix}-${profile}-steps`;
}

/**
 * Name of a sandbox profile's priority queue: the commands of `high` and `emergency` runs, which
 * the profile's workers receive before the step queue's. Its dead letters go to the same queue.
 */
export function priorityQueueName(prefix: string, profile: SandboxProfileName): string {
  return `${prefix}-${profile}-steps-priority`;
}

/** Name of the dead-letter queue behind a profile's step queue. */
export function deadLetterQueueName(prefix: string, profile: SandboxProfileName): string {
  return `${prefix}-${profile}-steps-dlq`;
}

/** How long a message stays in the dead-letter queue, and in the step queue. */
export const DEAD_LETTER_RETENTION_SECONDS = 14 * 24 * 3600;
export const STEP_QUEUE_RETENTION_SECONDS = 4 * 24 * 3600;
/** Long polling on every receive. */
export const RECEIVE_WAIT_SECONDS = 20;
/**
 * The largest step command Capstan sends (bytes of the encoded body). SQS takes up to 1 MiB
 * since 2025, but a queue's own MaximumMessageSize may be lower (256 KiB was the default), so
 * a command past this is refused before it is sent, the same in AWS and locally.
 */
export const MAX_COMMAND_BYTES = 256 * 1024;
/** The most bytes one SendMessageBatch request may carry. */
export const MAX_BATCH_BYTES = 1024 * 1024;

/** Every agent node's queue name starts with this, which is what IAM grants on. */
export const nodeQueuePrefix = (prefix: string) => `${prefix}-node-`;

/**
 * Name of an agent node's own step queue. SQS names take 80 letters, digits, `-` and `_`, and a
 * node id may be longer or hold `.` and `:`, so the name carries a hash of tenant and node (which
 * keeps two tenants' `web-1` apart) and, for people reading a console, as much of the id as fits.
 */
export function nodeQueueName(prefix: string, tenantId: string, nodeId: string): string {
  const hash = createHash('sha256').update(`${tenantId}\n${nodeId}`).digest('hex').slice(0, 16);
  const head = `${nodeQueuePrefix(prefix)}${hash}`;
  const room = 80 - head.length - 1;
  return room > 0 ? `${head}-${nodeId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, room)}` : head.slice(0, 80);
}

import type { SandboxProfileName } from '../../domain/sandbox-profiles.js';

/** A profile queue's approximate depth, as the queue reports it. */
export interface QueueDepthReading {
  /** Messages waiting to be received (`ApproximateNumberOfMessages`). */
  readonly visible: number;
  /** Messages received and not yet deleted: steps being run (`ApproximateNumberOfMessagesNotVisible`). */
  readonly inFlight: number;
}

/** Reads the depth of a sandbox profile's step queue; backpressure and scaling act on it. */
export interface QueueDepth {
  depth(profile: SandboxProfileName): Promise<QueueDepthReading>;
}

/** How many messages wait in each profile's step queue (approximate, as the queue reports it). */
export interface QueueDepths {
  depths(): Promise<ReadonlyMap<SandboxProfileName, number>>;
}

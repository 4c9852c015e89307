import type { SandboxProfileName } from '../../../domain/sandbox-profiles.js';
import type { QueueDepth, QueueDepthReading } from '../capacity.js';

/** A queue depth that tests set by hand; an unset profile reads empty. */
export interface SettableQueueDepth extends QueueDepth {
  set(profile: SandboxProfileName, reading: Partial<QueueDepthReading>): void;
  /** Reads made so far, so a test can hold a use case to its budget. */
  readonly reads: number;
}

export function makeSettableQueueDepth(): SettableQueueDepth {
  const readings = new Map<SandboxProfileName, QueueDepthReading>();
  let reads = 0;
  return {
    async depth(profile) {
      reads++;
      return readings.get(profile) ?? { visible: 0, inFlight: 0 };
    },
    set(profile, reading) {
      readings.set(profile, { visible: 0, inFlight: 0, ...readings.get(profile), ...reading });
    },
    get reads() {
      return reads;
    },
  };
}

import type { QueueDepth } from '../shared/app/ports/capacity.js';
import { nextPoolSize, type PoolBounds } from '../shared/domain/capacity.js';
import { SQSClient } from '@aws-sdk/client-sqs';
import { withoutSdkLogging } from '../shared/adapters/aws-clients.js';
import { makeSqsQueueDepth } from '../shared/adapters/sqs/queue-depth.js';
import { type CapacityConfig, capacityOf } from '../shared/config.js';
import { SANDBOX_PROFILE_NAMES, type SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import type { WorkerPool } from './workers.js';

export interface ScalerOptions {
  readonly pool: Pick<WorkerPool, 'size' | 'scale'>;
  readonly depth: QueueDepth;
  /** The profiles that scale, each with its bounds (`capacityOf`). */
  readonly profiles: ReadonlyMap<SandboxProfileName, PoolBounds>;
  /** How often the queues are read; one worker at most is scaled in per tick. */
  readonly intervalMs: number;
  readonly log: (line: string) => void;
}

/** One observation of a profile's pool: when, the backlog read, and the size it moved to. */
export interface PoolSample {
  readonly at: number;
  readonly profile: SandboxProfileName;
  readonly backlog: number;
  readonly size: number;
}

export interface Scaler {
  /** Every tick's samples, oldest first (kept for the last hour of ticks). */
  readonly samples: readonly PoolSample[];
  stop(): void;
}

const KEPT_SAMPLES = 3_600;

/**
 * What Application Auto Scaling does for a Fargate service, for the local worker processes: on
 * every tick it reads each profile queue's backlog (waiting + in flight) and moves the pool to
 * the size `nextPoolSize` gives, the same target tracking rule as the CDK stack's policy.
 */
export function startScaler(options: ScalerOptions): Scaler {
  const samples: PoolSample[] = [];
  let busy = false;
  const tick = async () => {
    for (const [profile, bounds] of options.profiles) {
      const reading = await options.depth.depth(profile);
      const backlog = reading.visible + reading.inFlight;
      const current = options.pool.size(profile);
      const size = nextPoolSize(bounds, current, backlog);
      if (size !== current) {
        options.log(`scaler: ${profile} ${current} -> ${size} workers (backlog ${backlog})`);
        options.pool.scale(profile, size);
      }
      samples.push({ at: Date.now(), profile, backlog, size });
      if (samples.length > KEPT_SAMPLES) samples.shift();
    }
  };
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    tick()
      .catch((error: unknown) => options.log(`scaler failed: ${(error as Error).message}`))
      .finally(() => (busy = false));
  }, options.intervalMs);
  return {
    samples,
    stop: () => clearInterval(timer),
  };
}

/**
 * The local stack's scaler: every profile's pool follows its queue on the local queue service,
 * within the bounds `CAPSTAN_CAPACITY` gives (as Application Auto Scaling does in AWS).
 */
export function startLocalScaler(options: {
  readonly pool: ScalerOptions['pool'];
  readonly queueEndpoint: string;
  readonly region: string;
  readonly prefix: string;
  readonly capacity: CapacityConfig | undefined;
  readonly intervalMs?: number;
  readonly log: (line: string) => void;
}): Scaler {
  const sqs = withoutSdkLogging(
    new SQSClient({
      endpoint: options.queueEndpoint,
      region: options.region,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      useQueueUrlAsEndpoint: false,
    }),
  );
  const scaler = startScaler({
    pool: options.pool,
    depth: makeSqsQueueDepth(sqs, options.prefix),
    profiles: new Map(SANDBOX_PROFILE_NAMES.map((profile) => [profile, capacityOf(options.capacity, profile)])),
    intervalMs: options.intervalMs ?? 2_000,
    log: options.log,
  });
  return {
    samples: scaler.samples,
    stop() {
      scaler.stop();
      sqs.destroy();
    },
  };
}

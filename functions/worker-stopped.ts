import { z } from 'zod';
import { makeRecoverLost } from '../shared/app/recovery.js';
import { makeWorkerDied } from '../shared/app/worker-deaths.js';
import { interpreterDeps, workerDeps } from './dependencies.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-worker-stopped');
const deps = { ...interpreterDeps(), ...workerDeps() };
const workerDied = makeWorkerDied({
  ...deps,
  recover: makeRecoverLost(deps),
  log: (message, fields) => logger.info(message, fields ?? {}),
});

/** ECS reports a worker task that stopped (the rule matches `lastStatus: STOPPED` on the workers' cluster). */
const taskStoppedSchema = z.object({
  source: z.literal('aws.ecs'),
  'detail-type': z.literal('ECS Task State Change'),
  detail: z.object({
    taskArn: z.string().min(1),
    lastStatus: z.literal('STOPPED'),
    stoppedReason: z.string().optional(),
    stopCode: z.string().optional(),
  }),
});

/** The local stack's supervisor reports a worker process that exited without draining. */
const processExitedSchema = z.object({
  source: z.literal('capstan.local'),
  'detail-type': z.literal('Worker Process Exited'),
  detail: z.object({ hostname: z.string().min(1), pid: z.number().int().positive(), how: z.string().min(1) }),
});

export const workerStoppedEventSchema = z.union([taskStoppedSchema, processExitedSchema]);

/**
 * A worker's task (or local process) stopped: recovers the step executions it held now rather
 * than when their leases lapse. Drained workers have deregistered, so their stop changes nothing.
 */
export const handler = observe(async (event: unknown): Promise<{ recovered: number }> => {
  const parsed = workerStoppedEventSchema.parse(event);
  const verdicts = await workerDied(
    parsed.source === 'aws.ecs'
      ? {
          taskArn: parsed.detail.taskArn,
          how: `task stopped: ${parsed.detail.stoppedReason ?? parsed.detail.stopCode ?? 'no reason given'}`,
        }
      : parsed.detail,
  );
  return { recovered: verdicts.length };
});

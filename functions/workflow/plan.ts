import { z } from 'zod';
import { makePlan } from '../../shared/app/plan.js';
import { planDeps } from '../dependencies.js';
import { lambdaTelemetry } from '../observability.js';
import { carriedRunOf, planResult } from './task-input.js';

const { logger, observe } = lambdaTelemetry('capstan-plan');
const deps = planDeps();
if (deps.policy instanceof Error)
  logger.error('every step will be denied until the policy is fixed', { error: deps.policy.message });
const plan = makePlan(deps);
const inputSchema = z.object({
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  /** Faults of the waiting tasks in a row, counted by the state machine. */
  faults: z
    .object({
      count: z.number().int().min(0),
      last: z.object({ Error: z.string().optional(), Cause: z.string().optional() }).optional(),
    })
    .optional(),
  /** The run as its creation stored it, for the execution's first Plan only (null afterwards). */
  carried: z.unknown().optional(),
});

/** The interpreter's Plan task: the next action for the run, as the Route state reads it. */
export const handler = observe(async (event: unknown): Promise<ReturnType<typeof planResult>> => {
  const { runId, tenantId, faults, carried: offered } = inputSchema.parse(event);
  if (faults?.last) logger.warn('a waiting task failed', { runId, faults: faults.count, error: faults.last.Error });
  const { carried, dropped } = carriedRunOf(offered, runId, tenantId);
  if (dropped) logger.warn('the run the execution carried is not this run: reading it', { runId });
  const planned = await plan(runId, faults, carried);
  logger.info('planned', { runId, decision: planned.decision });
  return planResult(planned);
});

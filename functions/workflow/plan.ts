import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { makePlanNext } from '../../shared/app/interpreter.js';
import type { PlanDecision } from '../../shared/domain/planner.js';
import { planDeps } from '../dependencies.js';

const logger = new Logger({ serviceName: 'capstan-plan' });
const deps = planDeps();
if (deps.policy instanceof Error)
  logger.error('every step will be denied until the policy is fixed', { error: deps.policy.message });
const planNext = makePlanNext(deps);
const inputSchema = z.object({ runId: z.string().min(1), tenantId: z.string().min(1) });

/** The interpreter's Plan task: the next action for the run, as the Route state reads it. */
export const handler = async (event: unknown): Promise<PlanDecision> => {
  const { runId } = inputSchema.parse(event);
  const decision = await planNext(runId);
  logger.info('planned', { runId, decision });
  return decision;
};

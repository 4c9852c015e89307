import { z } from 'zod';
import { errorInfoSchema } from './entities.js';
import { rateLimitsSchema } from './fanout.js';
import { resolvedTargetSchema } from './targets.js';

/**
 * The count of one step attempt's target results: Dispatch writes it, each result counts into it,
 * and whoever counts the last one resumes the interpreter task waiting on `taskToken`.
 */
export const aggregateSchema = z.object({
  kind: z.enum(['step', 'rollback']),
  stepId: z.string(),
  attempt: z.number().int(),
  total: z.number().int(),
  done: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
  completed: z.boolean(),
  taskToken: z.string(),
  /**
   * A fan-out unit's targets, resolved at its first dispatch and fixed from then on, in the order
   * they start; `released` of them have an execution, the rest wait for rate control.
   */
  targets: z.array(resolvedTargetSchema).optional(),
  released: z.number().int().optional(),
  limits: rateLimitsSchema.optional(),
  /** Targets never started because the error budget ran out (or the run was cancelled). */
  skipped: z.number().int().optional(),
  /** A pipeline phase's aggregate (named by its first step): it counts targets through the phase. */
  pipeline: z.boolean().optional(),
  /** Why a unit refused before any target started (policy, sandbox profile, no targets). */
  error: errorInfoSchema.optional(),
});
export type Aggregate = z.infer<typeof aggregateSchema>;

/** The recorded success of an idempotency key, so a retried step is not run twice. */
export const receiptSchema = z.object({
  key: z.string(),
  executionId: z.string(),
  outcome: z.enum(['succeeded', 'failed', 'timed_out']),
  output: z.record(z.string(), z.json()).optional(),
  recordedAt: z.string(),
});
export type Receipt = z.infer<typeof receiptSchema>;

import { z } from 'zod';

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

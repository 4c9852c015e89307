import { z } from 'zod';
import { errorInfoSchema, pipelinePositionSchema, prioritySchema } from './entities.js';
import { chainHeadSchema } from './events.js';
import { resolvedTargetSchema } from './targets.js';
import { sandboxProfileNameSchema } from './sandbox-profiles.js';

/** The command a worker receives from its profile's queue: one step on one target, one attempt. */
export const stepCommandSchema = z.strictObject({
  v: z.literal(1),
  executionId: z.string().min(1),
  runId: z.string().min(1),
  tenantId: z.string().min(1),
  stepId: z.string().min(1),
  kind: z.enum(['step', 'rollback']),
  targetId: z.string().min(1),
  attempt: z.number().int().positive(),
  idempotencyKey: z.string().min(1),
  backend: z.string().min(1),
  action: z.string().min(1),
  params: z.record(z.string(), z.json()),
  timeoutMs: z.number().int().positive(),
  secrets: z.array(z.string()),
  sandboxProfile: sandboxProfileNameSchema,
  correlationId: z.string().optional(),
  /**
   * The node the command acts on, when the step has a target: an agent node's command goes to that
   * node's own queue; a declared node's to the profile's queue, for any of its workers.
   */
  target: resolvedTargetSchema.optional(),
  pipeline: pipelinePositionSchema.optional(),
  /** The run's priority: a `high` or `emergency` run's commands go to the profile's priority queue. */
  priority: prioritySchema.optional(),
  /**
   * The interpreter's task token waiting on this step, when the step has one execution: its result
   * completes the step in the same transaction and resumes the interpreter without reading the
   * token back. Never logged. A token gone by then (the step's Dispatch re-attached with a new one)
   * is looked up on the step's aggregate.
   */
  taskToken: z.string().min(1).optional(),
  /**
   * Where the run's event chain stood when the command was sent, on a step of one execution: the
   * worker chains its first record on it without reading the run. A stale one costs a retry.
   */
  chainHead: chainHeadSchema.optional(),
});
export type StepCommand = z.infer<typeof stepCommandSchema>;

/** Whether a command goes to its profile's priority queue, which workers drain first. */
export const urgent = (command: Pick<StepCommand, 'priority'>): boolean =>
  command.priority === 'high' || command.priority === 'emergency';

/** What a worker reports when a step execution ends. */
export const stepResultSchema = z.strictObject({
  executionId: z.string().min(1),
  runId: z.string().min(1),
  workerId: z.string().min(1),
  outcome: z.enum(['succeeded', 'failed', 'timed_out']),
  output: z.record(z.string(), z.json()).optional(),
  error: errorInfoSchema.optional(),
  /** True when the result came from an existing action receipt, not a new effect. */
  fromReceipt: z.boolean().default(false),
});
export type StepResult = z.infer<typeof stepResultSchema>;

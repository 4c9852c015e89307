import { LIMIT_NAMES } from './admission/limit-names.js';
import { z } from 'zod';
import { resolvedTargetSchema } from './targets.js';
import { storableTextSchema } from './storable.js';
import { blastRadiusSchema } from './runbook.js';
import { environmentSchema, sandboxProfileNameSchema } from './sandbox-profiles.js';
import { approvalStatusSchema, runStatusSchema, stepExecutionStatusSchema, workerStatusSchema } from './statuses.js';

const iso = z.iso.datetime();
export const PRIORITIES = ['low', 'normal', 'high', 'emergency'] as const;
export const prioritySchema = z.enum(PRIORITIES);
export type Priority = z.infer<typeof prioritySchema>;

export const ROLES = ['viewer', 'operator', 'approver', 'admin'] as const;
export const roleSchema = z.enum(ROLES);
export type Role = z.infer<typeof roleSchema>;

/** Who is calling: from the authorizer, never from the request body. */
export const principalSchema = z.strictObject({
  subject: z.string().min(1),
  tenantId: z.string().min(1),
  roles: z.array(roleSchema),
});
export type Principal = z.infer<typeof principalSchema>;

export const ticketSchema = z.strictObject({
  id: storableTextSchema.min(1).max(200),
  source: storableTextSchema.min(1).max(100),
});

/** What started a run: an API call, or a ticket event from EventBridge or a signed webhook. */
export const triggerSchema = z.strictObject({
  type: z.enum(['api', 'eventbridge', 'webhook']),
  source: z.string().min(1).max(100),
  /** The ticket id and the event id: the same ticket event twice is one run. */
  ref: z.string().min(1).max(500),
});
export type Trigger = z.infer<typeof triggerSchema>;

/** A stored runbook version: immutable, addressed by id and version, identified by digest. */
export const runbookVersionSchema = z.strictObject({
  tenantId: z.string(),
  runbookId: z.string(),
  version: z.number().int().positive(),
  digest: z.string(),
  createdAt: iso,
  createdBy: z.string(),
  definition: z.record(z.string(), z.json()),
});
export type RunbookVersion = z.infer<typeof runbookVersionSchema>;

export const errorInfoSchema = z.strictObject({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean().optional(),
});
export type ErrorInfo = z.infer<typeof errorInfoSchema>;

/** One execution of a runbook version (seeds: session, job, execution). */
export const runSchema = z.strictObject({
  runId: z.string(),
  tenantId: z.string(),
  runbookId: z.string(),
  runbookVersion: z.number().int().positive(),
  runbookDigest: z.string(),
  status: runStatusSchema,
  inputs: z.record(z.string(), z.json()),
  ticket: ticketSchema.optional(),
  trigger: triggerSchema.optional(),
  priority: prioritySchema,
  idempotencyKey: z.string().optional(),
  requestedBy: z.string(),
  createdAt: iso,
  updatedAt: iso,
  startedAt: iso.optional(),
  endedAt: iso.optional(),
  nextEligibleAt: iso.optional(),
  /** What holds a `throttled` run back: the limit it met and, for a control, the source it names. */
  heldBy: z
    .strictObject({
      limit: z.enum(LIMIT_NAMES),
      source: z.string().optional(),
    })
    .optional(),
  currentStepId: z.string().optional(),
  cancelRequested: z.boolean().default(false),
  pausedReason: z.string().optional(),
  /** An operator's `retry` of a step that failed for good at this attempt. */
  operatorRetry: z.strictObject({ stepId: z.string(), attempt: z.number().int().positive() }).optional(),
  error: errorInfoSchema.optional(),
  replayOf: z.string().optional(),
  /** Runs of the same tenant that must succeed before this one starts. */
  dependsOn: z.array(z.string()).optional(),
  /**
   * A ticket's run queued behind the ticket's active run (a routing rule's `onActive: queue`): it
   * waits for that run to end, whatever its outcome, then takes the ticket and is admitted.
   */
  queuedBehind: z.string().optional(),
  /** Set when admission let the run start: the active counters it holds until it ends. */
  admission: z.strictObject({ at: iso, held: z.array(z.string()) }).optional(),
  /** Raised when the run failed for good on a runbook that escalates failures, or its failure opened a breaker. */
  incident: z
    .strictObject({
      raisedAt: iso,
      /** `run_failed` or `breaker_opened`. */
      reason: z.enum(['run_failed', 'breaker_opened']).optional(),
      acknowledgedAt: iso.optional(),
      acknowledgedBy: z.string().optional(),
    })
    .optional(),
});
export type Run = z.infer<typeof runSchema>;

/** One step on one target, one attempt: what a worker leases and reports. */
/** Where an execution stands in a pipeline phase: the phase's aggregate, and this target's failures so far. */
export const pipelinePositionSchema = z.strictObject({
  head: z.string(),
  failedBefore: z.boolean(),
});

export const stepExecutionSchema = z.strictObject({
  executionId: z.string(),
  runId: z.string(),
  tenantId: z.string(),
  stepId: z.string(),
  kind: z.enum(['step', 'rollback']),
  targetId: z.string(),
  attempt: z.number().int().positive(),
  status: stepExecutionStatusSchema,
  idempotencyKey: z.string(),
  leaseOwner: z.string().optional(),
  leaseExpiresAt: iso.optional(),
  createdAt: iso,
  startedAt: iso.optional(),
  endedAt: iso.optional(),
  outputTail: z.array(z.string()).default([]),
  error: errorInfoSchema.optional(),
  secretsUsed: z.array(z.string()).default([]),
  /** The node this execution acts on, for a step with a target. */
  target: resolvedTargetSchema.optional(),
  /** In a pipeline phase: the phase's first step (its aggregate) and whether this target failed earlier in it. */
  pipeline: pipelinePositionSchema.optional(),
});
export type StepExecution = z.infer<typeof stepExecutionSchema>;

/** A registered worker (seed 002): capabilities, liveness and load. */
export const workerSchema = z.strictObject({
  workerId: z.string(),
  hostname: z.string(),
  pid: z.number().int(),
  /** The ECS task it runs in (from the task metadata endpoint), so the task's stop names the worker. */
  taskArn: z.string().optional(),
  sandboxProfile: sandboxProfileNameSchema,
  environment: environmentSchema,
  backends: z.record(z.string(), z.array(z.string())),
  groups: z.array(z.string()).default([]),
  version: z.string(),
  status: workerStatusSchema,
  currentExecutionId: z.string().optional(),
  registeredAt: iso,
  lastHeartbeatAt: iso,
  stats: z
    .strictObject({ cpuPercent: z.number(), rssBytes: z.number(), tasksCompleted: z.number().int() })
    .default({ cpuPercent: 0, rssBytes: 0, tasksCompleted: 0 }),
});
export type Worker = z.infer<typeof workerSchema>;

export const decisionSchema = z.strictObject({
  approver: z.string(),
  decision: z.enum(['approve', 'reject']),
  notes: z.string().max(2000).optional(),
  decidedAt: iso,
  byPolicy: z.boolean().default(false),
});

/** A gate on a step, a phase or a run, needing N distinct approvers. */
export const approvalSchema = z.strictObject({
  approvalId: z.string(),
  runId: z.string(),
  tenantId: z.string(),
  scope: z.enum(['step', 'phase', 'run']),
  /** The step id, phase id, or `final` for the run's gate. */
  scopeId: z.string(),
  /** A gate asked again after a rejection (an operator's `retry`) is a new round. */
  round: z.number().int().min(1),
  /** The step whose dispatch asked for the gate, and what it proposes to do. */
  stepId: z.string(),
  proposedAction: z.string(),
  status: approvalStatusSchema,
  requiredApprovals: z.number().int().min(1),
  decisions: z.array(decisionSchema).default([]),
  /** The policy rule that asked for the gate, and why. */
  rule: z.string(),
  reason: z.string(),
  blastRadius: blastRadiusSchema,
  requestedBy: z.string(),
  requestedAt: iso,
  slaDeadline: iso,
  hardDeadline: iso,
  escalatedAt: iso.optional(),
  resolvedAt: iso.optional(),
});
export type Approval = z.infer<typeof approvalSchema>;

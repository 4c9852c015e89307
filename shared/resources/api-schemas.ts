import { z } from 'zod';
import { createRunBodySchema, eventsQuerySchema, idempotencyKeySchema, listRunsQuerySchema } from '../app/runs.js';
import { resumeBodySchema } from '../app/approvals.js';
import { unroutedQuerySchema, webhookPathSchema } from '../app/intake.js';
import { ticketEventSchema } from '../domain/intake/ticket.js';
import { artifactPathSchema } from '../app/artifacts.js';
import { createExportBodySchema, exportPathSchema } from '../app/exports.js';
import { replayBodySchema } from '../app/replay.js';
import { listWorkersQuerySchema, workerPathSchema } from '../app/workers.js';
import { decisionBodySchema } from '../domain/approvals.js';
import { RUN_STATUSES, WORKER_STATUSES } from '../domain/statuses.js';
import {
  approvalSchema,
  runbookVersionSchema,
  runSchema,
  stepExecutionSchema,
  workerSchema,
} from '../domain/entities.js';
import { runEventSchema } from '../domain/events.js';
import { runbookDocumentSchema } from '../domain/runbook.js';
import { runStatusSchema, stepExecutionStatusSchema } from '../domain/statuses.js';

/**
 * The request and response schemas of every REST route. Handlers parse their requests with the
 * request schemas; the OpenAPI document and the CLI are generated from, and parse with, the same
 * objects. Responses are loose objects: a field added later does not break an older client.
 */

// ---- path and query parameters the handlers parse ----

export const runPathSchema = z.object({ id: z.string().regex(/^run-[0-9a-f-]{36}$/, 'must be a run id') });
export const runbookPathSchema = z.object({ id: z.string().min(1).max(63) });
export const runbookQuerySchema = z.strictObject({ version: z.coerce.number().int().positive().optional() });
export const listRunbooksQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  cursor: z.string().optional(),
});
export const approvalPathSchema = z.object({
  id: z.string().min(1).max(200),
  approvalId: z.string().min(1).max(300),
});
export const createRunHeadersSchema = z.object({ 'Idempotency-Key': idempotencyKeySchema.optional() });

// ---- responses ----

/** The error body of every 4xx and 5xx. */
export const errorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});

const componentHealthSchema = z.object({
  status: z.enum(['ok', 'degraded', 'unavailable']),
  latencyMs: z.number(),
  detail: z.string().optional(),
});
export const healthSchema = z.object({
  status: z.enum(['ok', 'degraded', 'unavailable']),
  components: z.record(z.string(), componentHealthSchema),
});

export const registeredRunbookSchema = z.looseObject({ id: z.string(), version: z.number().int(), digest: z.string() });
export const runbookHeadSchema = z.looseObject({
  runbookId: z.string(),
  latestVersion: z.number().int(),
  digest: z.string(),
  description: z.string().optional(),
  updatedAt: z.string(),
});
export const runbookPageSchema = z.looseObject({
  items: z.array(runbookHeadSchema),
  nextCursor: z.string().optional(),
});
export const runbookVersionViewSchema = z.looseObject(runbookVersionSchema.shape);

export const runAcceptedSchema = z.looseObject({ runId: z.string(), status: runStatusSchema });

/** A run's failure: its code and message, and the step it failed on when a step did. */
const runErrorSchema = z.looseObject({ code: z.string(), message: z.string(), stepId: z.string().optional() });
const stepErrorSchema = z.looseObject({ code: z.string(), message: z.string() });

export const runSummarySchema = z.looseObject({ ...runSchema.shape, error: runErrorSchema.optional() });
export const runPageSchema = z.looseObject({ runs: z.array(runSummarySchema), nextCursor: z.string().optional() });

const targetViewSchema = z.looseObject({
  id: z.string(),
  targetId: z.string(),
  /** `waiting`: rate control has not started it yet; `skipped`: it never started. */
  status: z.union([stepExecutionStatusSchema, z.enum(['waiting', 'skipped'])]),
  attempt: z.number().int(),
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  outputTail: z.array(z.string()).default([]),
  error: stepErrorSchema.optional(),
  workerId: z.string().optional(),
});
export const stepViewSchema = z.looseObject({
  id: z.string(),
  phase: z.string(),
  backend: z.string(),
  action: z.string(),
  status: z.enum(['pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled']),
  attempts: z.number().int(),
  /** For a step with a target: the nodes it resolved to at its first dispatch. */
  expected: z.array(z.string()).optional(),
  counts: z.record(z.string(), z.number().int()).optional(),
  targets: z.array(targetViewSchema),
  rollback: z.looseObject({ status: stepExecutionStatusSchema }).optional(),
});
const attemptViewSchema = z.looseObject({
  executionId: z.string(),
  stepId: z.string(),
  kind: stepExecutionSchema.shape.kind,
  targetId: z.string(),
  attempt: z.number().int(),
  status: stepExecutionStatusSchema,
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  error: stepErrorSchema.optional(),
});
export const approvalViewSchema = z.looseObject(approvalSchema.shape);

/** `GET /v1/runs/{id}`: the run, its steps per target, every gate with its decisions, every attempt. */
export const runDetailSchema = runSummarySchema.extend({
  lastEventSeq: z.number().int(),
  steps: z.array(stepViewSchema),
  approvals: z.array(approvalViewSchema),
  attempts: z.array(attemptViewSchema),
  /** What a waiting or paused run waits for. */
  waitingFor: z.looseObject({}).optional(),
});
export type RunDetail = z.infer<typeof runDetailSchema>;

/** A run's incident: when and why it was raised, and who acknowledged it. */
export const incidentViewSchema = z.looseObject({
  raisedAt: z.string(),
  reason: z.string().optional(),
  acknowledgedAt: z.string().optional(),
  acknowledgedBy: z.string().optional(),
});

export const eventPageSchema = z.looseObject({
  events: z.array(runEventSchema),
  nextSince: z.number().int().optional(),
});
export const cancelledSchema = z.looseObject({
  runId: z.string(),
  status: runStatusSchema,
  cancelRequested: z.boolean(),
});
export const rollbackSchema = z.looseObject({
  runId: z.string(),
  status: runStatusSchema,
  rollbackRequested: z.boolean(),
});
export const resumedSchema = z.looseObject({
  runId: z.string(),
  status: runStatusSchema,
  directive: resumeBodySchema.shape.directive,
});
export const decisionResultSchema = z.looseObject({
  approval: approvalViewSchema,
  counted: z.boolean(),
  resolved: z.enum(['approved', 'rejected']).optional(),
});

export const workerViewSchema = z.looseObject({
  ...workerSchema.shape,
  drainRequested: z.boolean(),
  missedBeats: z.number().int(),
  secondsSinceHeartbeat: z.number(),
});
export const workerListSchema = z.looseObject({ workers: z.array(workerViewSchema) });
export const drainSchema = z.looseObject({
  workerId: z.string(),
  drainRequested: z.boolean(),
  seenWithinSeconds: z.number(),
});

/** A count for every key, each a property of its own so the document lists them. */
const countsOf = <K extends string>(keys: readonly K[]) =>
  z.strictObject(Object.fromEntries(keys.map((key) => [key, z.number().int()])) as Record<K, z.ZodNumber>);

/** The dashboard's figures for the caller's tenant (`DashboardMetrics`); the fleet only for the platform tenant. */
export const dashboardMetricsSchema = z.looseObject({
  tenantId: z.string(),
  at: z.string(),
  runs: z.looseObject({
    byStatus: countsOf(RUN_STATUSES),
    counted: z.number().int(),
    complete: z.boolean(),
  }),
  approvals: z.looseObject({ waiting: z.number().int(), oldestWaitingSeconds: z.number().int().nullable() }),
  failures: z.looseObject({ lastHour: z.number().int() }),
  queues: z.record(z.string(), z.number().int()).optional(),
  workers: countsOf(WORKER_STATUSES).optional(),
});

/** What one reconciler sweep did (`ReconcileSummary`). */
export const reconcileSummarySchema = z.looseObject({
  deadWorkers: z.number().int(),
  leasesExpired: z.number().int(),
  recovered: z.number().int(),
  notRecovered: z.number().int(),
  pausedForOperator: z.number().int(),
  statesFixed: z.number().int(),
  approvalsEscalated: z.number().int(),
  approvalsExpired: z.number().int(),
  stuckRuns: z.number().int(),
});

export const openApiDocumentSchema = z.looseObject({ openapi: z.string(), info: z.looseObject({}) });

/** What one route takes and answers; every route in the route table has one. */
export interface RouteSchemas {
  readonly summary: string;
  readonly params?: z.ZodObject;
  readonly query?: z.ZodObject;
  readonly headers?: z.ZodObject;
  /** The body; `yaml` when the route also takes the same document as YAML. */
  readonly body?: { readonly schema: z.ZodType; readonly yaml?: boolean };
  /** The success response: its status and body. */
  readonly response: {
    readonly status: number;
    readonly schema: z.ZodType;
    readonly alsoStatus?: number;
    /** What `alsoStatus` means, when it is not the same response already stored. */
    readonly alsoDescription?: string;
    /** `application/json` unless the route answers bytes (a bundle, an artifact). */
    readonly contentType?: string;
  };
}

/** A webhook's answer: the run (an existing one for a redelivery), or `matched: false`. */
export const webhookAcceptedSchema = z.looseObject({
  runId: z.string().optional(),
  status: runStatusSchema.optional(),
  duplicate: z.boolean().optional(),
  rule: z.string().optional(),
  matched: z.boolean().optional(),
});
export const webhookHeadersSchema = z.object({
  'X-Capstan-Signature': z.string().regex(/^sha256=[0-9a-f]{64}$/),
  'X-Capstan-Timestamp': z.string().regex(/^\d+$/),
});
export const unroutedPageSchema = z.looseObject({
  tickets: z.array(
    z.looseObject({ at: z.string(), via: z.string(), source: z.string(), ticketId: z.string(), reason: z.string() }),
  ),
  nextCursor: z.string().optional(),
});

export const REQUEST_BODIES = {
  runbook: { schema: runbookDocumentSchema, yaml: true },
  createRun: { schema: createRunBodySchema },
  decision: { schema: decisionBodySchema },
  resume: { schema: resumeBodySchema },
  /** The generic ticket body; ServiceNow and Jira sources send their own (docs/intake.md). */
  ticket: { schema: ticketEventSchema.partial({ source: true }) },
  replay: { schema: replayBodySchema },
  createExport: { schema: createExportBodySchema },
} as const;

export {
  eventsQuerySchema,
  listRunsQuerySchema,
  listWorkersQuerySchema,
  unroutedQuerySchema,
  webhookPathSchema,
  workerPathSchema,
};

// ---- evidence, artifacts, exports and replay ----

/** A binary answer, as OpenAPI 3.1 describes one. */
export const binarySchema = z.string().meta({ contentMediaType: 'application/octet-stream', format: 'binary' });
export const artifactSchema = z.looseObject({
  name: z.string(),
  stepId: z.string(),
  targetId: z.string().optional(),
  size: z.number().int(),
  sha256: z.string(),
});
export const artifactListSchema = z.looseObject({ artifacts: z.array(artifactSchema) });
export const replayAcceptedSchema = z.looseObject({ runId: z.string(), replayOf: z.string(), status: runStatusSchema });
export const exportCreatedSchema = z.looseObject({
  exportId: z.string(),
  runs: z.number().int(),
  size: z.number().int(),
  sha256: z.string(),
  since: z.string(),
  until: z.string(),
});
export { artifactPathSchema, exportPathSchema };

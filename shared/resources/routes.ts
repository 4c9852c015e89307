import { z } from 'zod';
import { dryRunPlanSchema } from '../app/dry-run.js';
import type { Role } from '../domain/entities.js';
import * as admission from './admission-schemas.js';
import * as api from './api-schemas.js';
import * as inventory from './inventory-schemas.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * The REST routes (brief: "Contracts"). Each names its handler module under
 * `functions/api/`; the CDK stack gives each its own function, and the local gateway
 * routes to the same modules.
 */
export interface RouteSpec {
  readonly method: HttpMethod;
  /** API Gateway resource path, with `{param}` segments. */
  readonly path: string;
  /** Handler module name in `functions/api/<handler>.ts`. */
  readonly handler: string;
  /** False for the health check, the OpenAPI document and the signed webhooks (their signature authenticates). */
  readonly authorized: boolean;
  /** Roles allowed to call: the one role check, enforced by `httpHandler`; tenant and requester rules stay in the use cases. */
  readonly roles: readonly Role[];
  /** AWS access beyond the tables, granted to this route's function and nothing else. */
  readonly access?: readonly RouteAccess[];
  /** What it takes and answers: the handler parses with these, and the OpenAPI document shows them. */
  readonly schemas: api.RouteSchemas;
}

/**
 * `start-runs`: start interpreter executions. `resume-runs`: send task success/failure to a
 * waiting execution. `check-health`: describe the tables, state machine, queues and bucket.
 * `reconcile`: what the scheduled reconciler may do (read and restart executions, resume tasks,
 * send commands). `ingest-tickets`: read the webhook signing keys and the routing document.
 * `build-evidence`: write bundles to the evidence bucket and sign manifests with the evidence key.
 * `read-evidence`: read objects (artifacts, exports) from the evidence bucket.
 * `read-queue-depths`: read the attributes (approximate depth) of the profile step queues.
 */
export type RouteAccess =
  | 'start-runs'
  | 'resume-runs'
  | 'check-health'
  | 'reconcile'
  | 'ingest-tickets'
  | 'build-evidence'
  | 'read-evidence'
  | 'read-queue-depths';

const ANY_ROLE: readonly Role[] = ['viewer', 'operator', 'approver', 'admin'];
const OPERATE: readonly Role[] = ['operator', 'admin'];
const ADMIN: readonly Role[] = ['admin'];

/** Quotas, limits and breakers (brief: "Admission"); each control change is logged with actor and reason. */
const ADMISSION_ROUTES: readonly RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/quotas',
    handler: 'list-quotas',
    authorized: true,
    roles: ANY_ROLE,
    schemas: { summary: "The tenant's quotas", response: { status: 200, schema: admission.quotaListSchema } },
  },
  ...(['PUT', 'PATCH'] as const).map((method): RouteSpec => ({
    method,
    path: '/v1/quotas/{id}',
    handler: method === 'PUT' ? 'put-quota' : 'patch-quota',
    authorized: true,
    roles: ADMIN,
    schemas: {
      summary: method === 'PUT' ? 'Set a quota on a runbook or on all (`*`)' : 'Change some fields of a quota',
      params: admission.quotaPathSchema,
      body: { schema: method === 'PUT' ? admission.quotaBodySchema : admission.quotaPatchSchema },
      response: { status: 200, schema: admission.quotaViewSchema },
    },
  })),
  {
    method: 'GET',
    path: '/v1/limits',
    handler: 'list-limits',
    authorized: true,
    roles: ANY_ROLE,
    schemas: { summary: 'Paused and throttled sources', response: { status: 200, schema: admission.limitListSchema } },
  },
  ...(['pause', 'resume', 'throttle'] as const).map((action): RouteSpec => ({
    method: 'POST',
    path: `/v1/limits/${action}`,
    handler: `${action}-source`,
    authorized: true,
    roles: OPERATE,
    // Resuming a source admits its held runs at once.
    ...(action === 'resume' && { access: ['start-runs' as const] }),
    schemas: {
      summary: `${action[0]?.toUpperCase()}${action.slice(1)} a source (a runbook or a trigger source)`,
      body: { schema: action === 'throttle' ? admission.throttleBodySchema : admission.pauseBodySchema },
      response: { status: 200, schema: admission.limitViewSchema },
    },
  })),
  {
    method: 'GET',
    path: '/v1/breakers',
    handler: 'list-breakers',
    authorized: true,
    roles: ANY_ROLE,
    schemas: { summary: "Runbooks' circuit breakers", response: { status: 200, schema: admission.breakerListSchema } },
  },
  {
    method: 'POST',
    path: '/v1/breakers/{runbook}/reset',
    handler: 'reset-breaker',
    authorized: true,
    roles: OPERATE,
    access: ['start-runs'],
    schemas: {
      summary: 'Close a breaker',
      params: admission.breakerPathSchema,
      body: { schema: admission.breakerResetBodySchema },
      response: { status: 200, schema: admission.breakerStateSchema },
    },
  },
];

/** The tenant's inventory (brief: "Inventory and targets"): declared nodes and agent nodes. */
const INVENTORY_ROUTES: readonly RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/inventory',
    handler: 'list-inventory',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: "The tenant's nodes (optionally one group's) with their status as of now",
      query: inventory.inventoryQuerySchema,
      response: { status: 200, schema: inventory.inventoryListSchema },
    },
  },
  {
    method: 'PUT',
    path: '/v1/inventory/nodes/{id}',
    handler: 'put-node',
    authorized: true,
    roles: ADMIN,
    schemas: {
      summary: "Declare a node the profile's workers act on remotely (409 when an agent node has the id)",
      params: inventory.nodePathSchema,
      body: { schema: inventory.declareNodeBodySchema },
      response: { status: 201, alsoStatus: 200, schema: inventory.declaredNodeSchema },
    },
  },
  {
    method: 'DELETE',
    path: '/v1/inventory/nodes/{id}',
    handler: 'delete-node',
    authorized: true,
    roles: ADMIN,
    schemas: {
      summary: 'Remove a node from the inventory',
      params: inventory.nodePathSchema,
      response: { status: 200, schema: inventory.removedNodeSchema },
    },
  },
];

export const ROUTES: readonly RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/health',
    handler: 'health',
    authorized: false,
    roles: [],
    access: ['check-health'],
    schemas: { summary: 'The status of each component', response: { status: 200, schema: api.healthSchema } },
  },
  {
    method: 'GET',
    path: '/v1/openapi.json',
    handler: 'openapi',
    authorized: false,
    roles: [],
    schemas: { summary: 'This document', response: { status: 200, schema: api.openApiDocumentSchema } },
  },
  {
    method: 'POST',
    path: '/v1/runbooks',
    handler: 'create-runbook',
    authorized: true,
    roles: OPERATE,
    schemas: {
      summary: 'Register a runbook version (the same content twice gives the same version)',
      body: api.REQUEST_BODIES.runbook,
      response: { status: 201, alsoStatus: 200, schema: api.registeredRunbookSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/runbooks',
    handler: 'list-runbooks',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: "List the tenant's runbooks with their latest versions",
      query: api.listRunbooksQuerySchema,
      response: { status: 200, schema: api.runbookPageSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/runbooks/{id}',
    handler: 'get-runbook',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: 'One runbook version (the latest when no version is given)',
      params: api.runbookPathSchema,
      query: api.runbookQuerySchema,
      response: { status: 200, schema: api.runbookVersionViewSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs',
    handler: 'create-run',
    authorized: true,
    roles: OPERATE,
    access: ['start-runs'],
    schemas: {
      summary: 'Start a run of a runbook version',
      headers: api.createRunHeadersSchema,
      body: api.REQUEST_BODIES.createRun,
      response: {
        status: 202,
        schema: z.union([api.runAcceptedSchema, dryRunPlanSchema]),
        alsoStatus: 200,
        alsoDescription: 'A dry run: the plan (targets, policy decisions, gates, waves); nothing is stored',
      },
    },
  },
  {
    method: 'GET',
    path: '/v1/runs',
    handler: 'list-runs',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: 'List runs, newest first',
      query: api.listRunsQuerySchema,
      response: { status: 200, schema: api.runPageSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}',
    handler: 'get-run',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: 'A run with its steps per target, attempts and gates',
      params: api.runPathSchema,
      response: { status: 200, schema: api.runDetailSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/events',
    handler: 'get-run-events',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: "A run's events after `since`, in seq order",
      params: api.runPathSchema,
      query: api.eventsQuerySchema,
      response: { status: 200, schema: api.eventPageSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/cancel',
    handler: 'cancel-run',
    authorized: true,
    roles: OPERATE,
    access: ['resume-runs'],
    schemas: {
      summary: 'Cancel a run once its running step executions finish',
      params: api.runPathSchema,
      response: { status: 202, schema: api.cancelledSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/incident/ack',
    handler: 'ack-incident',
    authorized: true,
    roles: OPERATE,
    schemas: {
      summary: "Acknowledge the run's incident",
      params: api.runPathSchema,
      response: { status: 200, schema: api.incidentViewSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/rollback',
    handler: 'rollback-run',
    authorized: true,
    roles: OPERATE,
    access: ['resume-runs'],
    schemas: {
      summary: 'Roll back what the run did, newest first',
      params: api.runPathSchema,
      response: { status: 202, schema: api.rollbackSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/resume',
    handler: 'resume-run',
    authorized: true,
    roles: OPERATE,
    access: ['resume-runs'],
    schemas: {
      summary: "An operator's directive for a paused run",
      params: api.runPathSchema,
      body: api.REQUEST_BODIES.resume,
      response: { status: 202, schema: api.resumedSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/approvals/{approvalId}',
    handler: 'decide-approval',
    authorized: true,
    roles: ['approver', 'admin'],
    access: ['resume-runs'],
    schemas: {
      summary: 'Approve or reject a gate',
      params: api.approvalPathSchema,
      body: api.REQUEST_BODIES.decision,
      response: { status: 200, schema: api.decisionResultSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/webhooks/{source}',
    handler: 'webhook',
    authorized: false,
    roles: [],
    access: ['start-runs', 'ingest-tickets'],
    schemas: {
      summary: 'A signed ticket webhook: routed like a Ticket event, 202 with the run (docs/intake.md)',
      params: api.webhookPathSchema,
      headers: api.webhookHeadersSchema,
      body: api.REQUEST_BODIES.ticket,
      response: { status: 202, schema: api.webhookAcceptedSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/intake/unrouted',
    handler: 'list-unrouted',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: 'Ticket events that started no run (no rule matched, an active run, ...), newest first',
      query: api.unroutedQuerySchema,
      response: { status: 200, schema: api.unroutedPageSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/workers',
    handler: 'list-workers',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: 'Registered workers with their status as of now',
      query: api.listWorkersQuerySchema,
      response: { status: 200, schema: api.workerListSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/workers/{id}/drain',
    handler: 'drain-worker',
    authorized: true,
    roles: OPERATE,
    schemas: {
      summary: 'Drain a worker: it finishes its step, deregisters and exits',
      params: api.workerPathSchema,
      response: { status: 202, schema: api.drainSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/dashboard/metrics',
    handler: 'dashboard-metrics',
    authorized: true,
    roles: ANY_ROLE,
    access: ['read-queue-depths'],
    schemas: {
      summary:
        "The tenant's runs by status, waiting approvals and their age, failures in the last hour; queue depth and workers for the platform tenant",
      response: { status: 200, schema: api.dashboardMetricsSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/reconcile',
    handler: 'reconcile',
    authorized: true,
    roles: ['admin'],
    access: ['reconcile'],
    schemas: {
      summary: 'Run one reconciler sweep now and answer its summary',
      response: { status: 200, schema: api.reconcileSummarySchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/evidence',
    handler: 'get-evidence',
    authorized: true,
    roles: ANY_ROLE,
    access: ['build-evidence'],
    schemas: {
      summary: "A finished run's signed evidence bundle (a gzipped tar; 409 while the run is not finished)",
      params: api.runPathSchema,
      response: { status: 200, schema: api.binarySchema, contentType: 'application/gzip' },
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/artifacts',
    handler: 'list-artifacts',
    authorized: true,
    roles: ANY_ROLE,
    schemas: {
      summary: "The files a run's steps stored, with their size and sha256",
      params: api.runPathSchema,
      response: { status: 200, schema: api.artifactListSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/artifacts/{name}',
    handler: 'get-artifact',
    authorized: true,
    roles: ANY_ROLE,
    access: ['read-evidence'],
    schemas: {
      summary: 'One artifact of a run',
      params: api.artifactPathSchema,
      response: { status: 200, schema: api.binarySchema, contentType: 'application/octet-stream' },
    },
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/replay',
    handler: 'replay-run',
    authorized: true,
    roles: OPERATE,
    access: ['start-runs'],
    schemas: {
      summary: 'Start a new run of the same runbook version and inputs, recorded as a replay of this one',
      params: api.runPathSchema,
      body: api.REQUEST_BODIES.replay,
      response: { status: 202, schema: api.replayAcceptedSchema },
    },
  },
  {
    method: 'POST',
    path: '/v1/exports',
    handler: 'create-export',
    authorized: true,
    roles: OPERATE,
    access: ['build-evidence'],
    schemas: {
      summary: 'Export every run of the tenant in a window as one signed bundle',
      body: api.REQUEST_BODIES.createExport,
      response: { status: 201, schema: api.exportCreatedSchema },
    },
  },
  {
    method: 'GET',
    path: '/v1/exports/{id}',
    handler: 'get-export',
    authorized: true,
    roles: OPERATE,
    access: ['read-evidence'],
    schemas: {
      summary: 'Download an export of the tenant (a gzipped tar)',
      params: api.exportPathSchema,
      response: { status: 200, schema: api.binarySchema, contentType: 'application/gzip' },
    },
  },
  ...ADMISSION_ROUTES,
  ...INVENTORY_ROUTES,
];

const templates = ROUTES.map((spec) => ({
  spec,
  pattern: new RegExp(`^${spec.path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
}));

/** The route for a method and an API Gateway resource (its template, or a concrete path). */
export function routeFor(method: string, resource: string): RouteSpec | undefined {
  return templates.find((t) => t.spec.method === method && t.pattern.test(resource))?.spec;
}

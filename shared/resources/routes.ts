import type { Role } from '../domain/entities.js';

export type HttpMethod = 'GET' | 'POST' | 'PATCH';

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
  /** False only for the health check. */
  readonly authorized: boolean;
  /** Roles allowed to call; enforced again in the use case. */
  readonly roles: readonly Role[];
  /** AWS access beyond the tables, granted to this route's function and nothing else. */
  readonly access?: readonly RouteAccess[];
}

/**
 * `start-runs`: start interpreter executions. `resume-runs`: send task success/failure to a
 * waiting execution. `check-health`: describe the tables, state machine, queues and bucket.
 */
export type RouteAccess = 'start-runs' | 'resume-runs' | 'check-health';

const ANY_ROLE: readonly Role[] = ['viewer', 'operator', 'approver', 'admin'];
const OPERATE: readonly Role[] = ['operator', 'admin'];

export const ROUTES: readonly RouteSpec[] = [
  { method: 'GET', path: '/v1/health', handler: 'health', authorized: false, roles: [], access: ['check-health'] },
  { method: 'POST', path: '/v1/runbooks', handler: 'create-runbook', authorized: true, roles: OPERATE },
  { method: 'GET', path: '/v1/runbooks', handler: 'list-runbooks', authorized: true, roles: ANY_ROLE },
  { method: 'GET', path: '/v1/runbooks/{id}', handler: 'get-runbook', authorized: true, roles: ANY_ROLE },
  {
    method: 'POST',
    path: '/v1/runs',
    handler: 'create-run',
    authorized: true,
    roles: OPERATE,
    access: ['start-runs'],
  },
  { method: 'GET', path: '/v1/runs', handler: 'list-runs', authorized: true, roles: ANY_ROLE },
  { method: 'GET', path: '/v1/runs/{id}', handler: 'get-run', authorized: true, roles: ANY_ROLE },
  { method: 'GET', path: '/v1/runs/{id}/events', handler: 'get-run-events', authorized: true, roles: ANY_ROLE },
  {
    method: 'POST',
    path: '/v1/runs/{id}/cancel',
    handler: 'cancel-run',
    authorized: true,
    roles: OPERATE,
    access: ['resume-runs'],
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/rollback',
    handler: 'rollback-run',
    authorized: true,
    roles: OPERATE,
    access: ['resume-runs'],
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/resume',
    handler: 'resume-run',
    authorized: true,
    roles: OPERATE,
    access: ['resume-runs'],
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/approvals/{approvalId}',
    handler: 'decide-approval',
    authorized: true,
    roles: ['approver', 'admin'],
    access: ['resume-runs'],
  },
  { method: 'GET', path: '/v1/workers', handler: 'list-workers', authorized: true, roles: ANY_ROLE },
  { method: 'POST', path: '/v1/workers/{id}/drain', handler: 'drain-worker', authorized: true, roles: OPERATE },
];

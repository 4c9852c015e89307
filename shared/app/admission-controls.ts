import { randomUUID } from 'node:crypto';
import type { Json } from '../domain/canonical.js';
import type { Principal } from '../domain/entities.js';
import { ValidationError } from '../domain/errors.js';
import { type BreakerState, breakerStateSchema, closedBreaker } from '../domain/admission/breaker.js';
import type { pauseBodySchema, throttleBodySchema } from '../domain/admission/limits.js';
import { type Limit, limitSchema } from '../domain/admission/limits.js';
import type { Controls } from '../domain/admission/plan.js';
import { type Bucket, type Quota, type QuotaBody, quotaBodySchema, quotaSchema } from '../domain/admission/quotas.js';
import type { z } from 'zod';
import { type AdmissionStore, type AdmissionWrite, CONTROL, LOG } from './ports/admission.js';
import { requireRole } from './authorize.js';
import type { Clock } from './ports.js';

export interface ControlDeps {
  readonly admission: AdmissionStore;
  readonly clock: Clock;
}

export const quotaCell = (runbook: string) => `${CONTROL}quota#${runbook}`;
export const limitCell = (kind: Limit['kind'], source: string) => `${CONTROL}limit#${kind}#${source}`;
export const breakerCell = (runbookId: string) => `${CONTROL}breaker#${runbookId}`;
export const bucketCell = (name: string) => `${CONTROL}${name}`;

/** Every control of a tenant, read at once (one query on its admission partition). */
export async function readControls(admission: AdmissionStore, tenantId: string): Promise<Controls> {
  const cells = await admission.cells(tenantId, CONTROL);
  const quotas: Quota[] = [];
  const limits: Limit[] = [];
  const breakers = new Map<string, BreakerState>();
  const buckets = new Map<string, Bucket>();
  for (const cell of cells) {
    const kind = cell.name.slice(CONTROL.length).split('#')[0];
    if (kind === 'quota') quotas.push(quotaSchema.parse(cell.value));
    else if (kind === 'limit') limits.push(limitSchema.parse(cell.value));
    else if (kind === 'breaker') {
      const breaker = breakerStateSchema.parse(cell.value);
      breakers.set(breaker.runbookId, breaker);
    } else if (kind === 'bucket')
      buckets.set(cell.name.slice(CONTROL.length), {
        tokens: Number(cell.value.tokens),
        at: String(cell.value.at),
      });
  }
  return { quotas, limits, breakers, buckets };
}

/** A control-log entry: who changed which control, why, and to what (exports read it as `controls.jsonl`). */
export function controlLogEntry(
  tenantId: string,
  at: string,
  type: string,
  actor: string,
  details: { readonly [key: string]: Json },
): AdmissionWrite {
  const id = randomUUID();
  return {
    kind: 'putCell',
    tenantId,
    name: `${LOG}${at}#${id}`,
    value: { id, type, actor, at, ...details },
    expect: 'absent',
  };
}

/** The tenant's control log, oldest first (`log#<at>#<id>` sorts by time), for evidence exports. */
export function makeControlLog(admission: Pick<AdmissionStore, 'cells'>) {
  return {
    entries: async (tenantId: string) => (await admission.cells(tenantId, LOG, 10_000)).map((cell) => cell.value),
  };
}

const asJson = (value: object) => JSON.parse(JSON.stringify(value)) as { [key: string]: Json };

export function makeQuotaControls(deps: ControlDeps) {
  const list = async (principal: Principal) => (await readControls(deps.admission, principal.tenantId)).quotas;
  return {
    list,
    /** PUT replaces the quota; PATCH merges into the one stored. `id` names the runbook or `*`. */
    async set(principal: Principal, id: string, body: unknown, merge: boolean): Promise<Quota> {
      requireRole(principal, ['admin'], 'changing a quota');
      const current = merge ? (await list(principal)).find((q) => q.runbook === id) : undefined;
      const base = current
        ? (({ tenantId: _t, updatedAt: _u, updatedBy: _b, ...rest }: Quota) => rest)(current)
        : { runbook: id };
      const parsed = quotaBodySchema.safeParse({ ...base, ...(body as object), runbook: id });
      if (!parsed.success)
        throw new ValidationError(
          'the quota is not valid',
          parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
        );
      if ((body as Partial<QuotaBody>).runbook !== undefined && (body as Partial<QuotaBody>).runbook !== id)
        throw new ValidationError('the body names another runbook than the path', [
          { path: 'runbook', message: `must be '${id}'` },
        ]);
      const at = deps.clock.now().toISOString();
      const quota: Quota = {
        ...parsed.data,
        tenantId: principal.tenantId,
        updatedAt: at,
        updatedBy: principal.subject,
      };
      await deps.admission.commit([
        { kind: 'putCell', tenantId: principal.tenantId, name: quotaCell(id), value: asJson(quota) },
        controlLogEntry(principal.tenantId, at, 'quota.set', principal.subject, { quota: asJson(quota) }),
      ]);
      return quota;
    },
  };
}

export function makeLimitControls(deps: ControlDeps) {
  const OPERATE = ['operator', 'admin'] as const;
  return {
    list: async (principal: Principal) => (await readControls(deps.admission, principal.tenantId)).limits,
    async pause(principal: Principal, body: z.infer<typeof pauseBodySchema>) {
      requireRole(principal, OPERATE, 'pausing a source');
      const at = deps.clock.now().toISOString();
      const limit: Limit = { kind: 'pause', tenantId: principal.tenantId, ...body, by: principal.subject, at };
      await deps.admission.commit([
        { kind: 'putCell', tenantId: principal.tenantId, name: limitCell('pause', body.source), value: asJson(limit) },
        controlLogEntry(principal.tenantId, at, 'limit.paused', principal.subject, asJson(body)),
      ]);
      return limit;
    },
    async resume(principal: Principal, body: z.infer<typeof pauseBodySchema>) {
      requireRole(principal, OPERATE, 'resuming a source');
      const at = deps.clock.now().toISOString();
      await deps.admission.commit([
        { kind: 'deleteCell', tenantId: principal.tenantId, name: limitCell('pause', body.source), mustExist: false },
        {
          kind: 'deleteCell',
          tenantId: principal.tenantId,
          name: limitCell('throttle', body.source),
          mustExist: false,
        },
        controlLogEntry(principal.tenantId, at, 'limit.resumed', principal.subject, asJson(body)),
      ]);
      return { source: body.source, resumedAt: at };
    },
    async throttle(principal: Principal, body: z.infer<typeof throttleBodySchema>) {
      requireRole(principal, OPERATE, 'throttling a source');
      const at = deps.clock.now().toISOString();
      const limit: Limit = { kind: 'throttle', tenantId: principal.tenantId, ...body, by: principal.subject, at };
      await deps.admission.commit([
        {
          kind: 'putCell',
          tenantId: principal.tenantId,
          name: limitCell('throttle', body.source),
          value: asJson(limit),
        },
        controlLogEntry(principal.tenantId, at, 'limit.throttled', principal.subject, asJson(body)),
      ]);
      return limit;
    },
  };
}

export function makeBreakerControls(deps: ControlDeps) {
  return {
    list: async (principal: Principal) => [
      ...(await readControls(deps.admission, principal.tenantId)).breakers.values(),
    ],
    async reset(principal: Principal, runbookId: string, reason = 'reset') {
      requireRole(principal, ['operator', 'admin'], 'resetting a breaker');
      const now = deps.clock.now();
      const breaker = closedBreaker(runbookId, now);
      await deps.admission.commit([
        { kind: 'putCell', tenantId: principal.tenantId, name: breakerCell(runbookId), value: asJson(breaker) },
        controlLogEntry(principal.tenantId, now.toISOString(), 'breaker.reset', principal.subject, {
          runbookId,
          reason,
        }),
      ]);
      return breakerStateSchema.parse(breaker);
    },
  };
}

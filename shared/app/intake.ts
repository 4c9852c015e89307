import { z } from 'zod';
import { canonicalJson, sha256Hex } from '../domain/canonical.js';
import type { Principal, Trigger } from '../domain/entities.js';
import { CapstanError, ForbiddenError, NotFoundError, UnauthorizedError, ValidationError } from '../domain/errors.js';
import { formatOf, ticketFromWebhook } from '../domain/intake/payloads.js';
import { matchRule, type RoutesDocument, ruleInputs } from '../domain/intake/routing.js';
import { SIGNATURE_WINDOW_SECONDS, verifyWebhook } from '../domain/intake/signature.js';
import { type TicketEvent, TicketBusyError } from '../domain/intake/ticket.js';
import type { Clock, Page } from './ports.js';
import type { makeCreateRun } from './runs.js';

/** Why a ticket event did not become a run. */
export type IntakeReason = 'unmatched' | 'unknown_runbook' | 'missing_values' | 'active_run' | 'conflict';

/** A ticket event that did not start a run, kept so an operator can list it (never dropped). */
export interface IntakeRecord {
  readonly at: string;
  readonly via: Trigger['type'];
  readonly source: string;
  readonly ticketId: string;
  readonly ticketType: string;
  readonly priority?: string;
  readonly reason: IntakeReason;
  readonly message: string;
  readonly ruleId?: string;
  readonly tenantId?: string;
  readonly activeRunId?: string;
}

/** Where refused and unmatched ticket events are recorded. */
export interface IntakeLog {
  record(entry: IntakeRecord): Promise<void>;
  list(limit: number, cursor?: string): Promise<Page<IntakeRecord>>;
}

/** Signatures already used, so a replayed webhook is refused while its timestamp is still fresh. */
export interface WebhookNonces {
  /** False when this signature was seen before. */
  claim(source: string, signature: string, expiresAtSeconds: number): Promise<boolean>;
  release(source: string, signature: string): Promise<void>;
}

/** Each webhook source's signing key (the secret `capstan/webhooks/<source>`); undefined when none. */
export interface WebhookKeys {
  keyFor(source: string): Promise<string | undefined>;
}

export interface IntakeDeps {
  readonly routes: RoutesDocument;
  /** The tenant of a rule that names none (the deployment's platform tenant). */
  readonly defaultTenant?: string;
  readonly createRun: ReturnType<typeof makeCreateRun>;
  readonly intake: IntakeLog;
  readonly clock: Clock;
  readonly log: (message: string, fields: Record<string, unknown>) => void;
}

export type IngestResult =
  | {
      readonly outcome: 'created' | 'duplicate';
      readonly runId: string;
      readonly status: string;
      readonly ruleId: string;
    }
  | { readonly outcome: 'unmatched' };

/** The id of one ticket event: the system's event id, else a digest of the event's content. */
export function ticketRef(ticket: TicketEvent): string {
  return `${ticket.id}#${ticket.eventId ?? sha256Hex(canonicalJson(ticket)).slice(0, 16)}`;
}

/**
 * Turns a ticket event into a run.
 * Input: the ticket event and how it came (EventBridge or a webhook, and its source).
 * Output: the run created (or the one this event created before), or `unmatched`.
 * Steps: match the routing rules in order; map ticket values to inputs; create the run through
 * the same use case as `POST /v1/runs`, its idempotency key derived from the source, ticket id and
 * event id (so a redelivery is the same run) and its trigger naming the ticket event. A ticket no
 * rule matches, or one that cannot start a run, is recorded and logged, then the error (if any)
 * is thrown for the caller to map.
 */
export function makeIngestTicket(deps: IntakeDeps) {
  const report = async (
    ticket: TicketEvent,
    via: Trigger['type'],
    entry: Omit<IntakeRecord, 'at' | 'via' | 'source' | 'ticketId' | 'ticketType' | 'priority'>,
  ) => {
    const record: IntakeRecord = {
      at: deps.clock.now().toISOString(),
      via,
      source: ticket.source,
      ticketId: ticket.id,
      ticketType: ticket.type,
      ...(ticket.priority && { priority: ticket.priority }),
      ...entry,
    };
    const { message, ...fields } = record;
    deps.log(`ticket event did not start a run: ${message}`, fields);
    await deps.intake.record(record);
  };

  return async function ingestTicket(ticket: TicketEvent, via: Trigger['type']): Promise<IngestResult> {
    const rule = matchRule(deps.routes, ticket);
    if (!rule) {
      await report(ticket, via, { reason: 'unmatched', message: 'no routing rule matches this ticket' });
      return { outcome: 'unmatched' };
    }
    const tenantId = rule.tenant ?? deps.defaultTenant;
    if (tenantId === undefined) throw new Error(`rule '${rule.id}' names no tenant and the deployment has none`);
    const ruled = { ruleId: rule.id, tenantId };
    let inputs;
    try {
      inputs = ruleInputs(rule, ticket);
    } catch (error) {
      if (error instanceof ValidationError)
        await report(ticket, via, { ...ruled, reason: 'missing_values', message: error.message });
      throw error;
    }
    const ref = ticketRef(ticket);
    const principal: Principal = { subject: `${via}:${ticket.source}`, tenantId, roles: ['operator'] };
    try {
      const run = await deps.createRun({
        principal,
        body: {
          runbookId: rule.runbook,
          ...(rule.version !== undefined && { version: rule.version }),
          inputs,
          ticket: { id: ticket.id, source: ticket.source },
          priority: rule.priority,
        },
        idempotencyKey: `ticket:${sha256Hex(`${ticket.source}\n${ref}`).slice(0, 48)}`,
        trigger: { type: via, source: ticket.source, ref },
        onActive: rule.onActive,
      });
      return { outcome: run.created ? 'created' : 'duplicate', runId: run.runId, status: run.status, ruleId: rule.id };
    } catch (error) {
      if (error instanceof TicketBusyError)
        await report(ticket, via, {
          ...ruled,
          reason: 'active_run',
          message: error.message,
          activeRunId: error.activeRunId,
        });
      else if (error instanceof NotFoundError)
        await report(ticket, via, { ...ruled, reason: 'unknown_runbook', message: error.message });
      else if (error instanceof CapstanError)
        await report(ticket, via, { ...ruled, reason: 'conflict', message: error.message });
      throw error;
    }
  };
}

export interface WebhookDeps {
  readonly routes: RoutesDocument;
  readonly keys: WebhookKeys;
  readonly nonces: WebhookNonces;
  readonly ingest: ReturnType<typeof makeIngestTicket>;
  readonly clock: Clock;
}

/** One answer for every authentication failure, so a caller learns nothing about which sources exist. */
const unauthorized = () => new UnauthorizedError('the webhook signature is not valid');

/**
 * Receives a signed ticket webhook.
 * Input: the source (from the path), the raw body and the signature headers.
 * Output: the ingest result. Steps: look up the source's key; check the signature and the
 * timestamp window; claim the signature so a replay is refused; read the body with the source's
 * payload adapter; ingest it like an EventBridge ticket event.
 */
export function makeReceiveWebhook(deps: WebhookDeps) {
  return async (input: {
    source: string;
    body: string | undefined;
    signature: string | undefined;
    timestamp: string | undefined;
  }): Promise<IngestResult> => {
    if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(input.source)) throw unauthorized();
    const key = await deps.keys.keyFor(input.source);
    if (key === undefined) throw unauthorized();
    const body = input.body ?? '';
    const nowSeconds = Math.floor(deps.clock.now().getTime() / 1000);
    const verdict = verifyWebhook({ key, body, signature: input.signature, timestamp: input.timestamp, nowSeconds });
    if (!verdict.ok) throw unauthorized();
    const signature = input.signature ?? '';
    // Kept past the window's far edge, so a replay is refused for as long as its timestamp is fresh.
    if (!(await deps.nonces.claim(input.source, signature, nowSeconds + 2 * SIGNATURE_WINDOW_SECONDS + 60)))
      throw new UnauthorizedError('this webhook was already received');
    try {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch (error) {
        throw new ValidationError('the body is not valid JSON', [{ path: 'body', message: (error as Error).message }]);
      }
      const ticket = ticketFromWebhook(formatOf(input.source, deps.routes.webhooks), parsed, input.source);
      return await deps.ingest(ticket, 'webhook');
    } catch (error) {
      // A failure on our side must not burn the signature: the sender may retry the same request.
      if (!(error instanceof CapstanError)) await deps.nonces.release(input.source, signature);
      throw error;
    }
  };
}

/** The refused and unmatched ticket events, for the deployment's own tenant only (like the fleet). */
export function makeListUnrouted(deps: { intake: IntakeLog; platformTenant?: string }) {
  return (principal: Principal, query: { limit: number; cursor?: string }) => {
    if (deps.platformTenant === undefined || principal.tenantId !== deps.platformTenant)
      throw new ForbiddenError('only the deployment tenant sees ticket intake');
    return deps.intake.list(query.limit, query.cursor);
  };
}

export const unroutedQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(25),
  cursor: z.string().optional(),
});

export const webhookPathSchema = z.object({ source: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/) });

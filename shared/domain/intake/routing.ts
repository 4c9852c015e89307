import { z } from 'zod';
import { prioritySchema } from '../entities.js';
import { ValidationError } from '../errors.js';
import { issuesFromZod } from '../zod-issues.js';
import type { TicketEvent, TicketFieldValue } from './ticket.js';

const oneOrMany = z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]);
const runbookIdSchema = z.string().min(1).max(64);

/** What a rule matches: every condition given must hold; a list means any of its values. */
const matchSchema = z.strictObject({
  source: oneOrMany.optional(),
  type: oneOrMany.optional(),
  priority: oneOrMany.optional(),
  /** Field values, compared as text; a list field matches when it holds one of the values. */
  fields: z.record(z.string().min(1), oneOrMany).optional(),
});

/** One routing rule: which tickets, which runbook (and version), which inputs, for which tenant. */
export const routingRuleSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'lower-case letters, digits and dashes, at most 64'),
  match: matchSchema.default({}),
  /** The tenant the run belongs to; the deployment's platform tenant when omitted. */
  tenant: z.string().min(1).max(64).optional(),
  runbook: runbookIdSchema,
  /** A pinned version; the latest when omitted. */
  version: z.number().int().positive().optional(),
  /** Run inputs from ticket data: `{{ ticket.id }}`, `{{ ticket.fields.host }}`, or literal text. */
  inputs: z.record(z.string().min(1), z.string()).default({}),
  priority: prioritySchema.default('normal'),
  /**
   * A ticket that already has an active run: `refuse` the new run (409 naming the active one), or
   * `queue` it behind the active run, to start when that one ends.
   */
  onActive: z.enum(['refuse', 'queue']).default('refuse'),
});
export type RoutingRule = z.infer<typeof routingRuleSchema>;

/** Per webhook source: which body format its system sends (named after the source by default). */
const webhookSourceSchema = z.strictObject({ format: z.enum(['generic', 'servicenow', 'jira']) });
export type WebhookFormat = z.infer<typeof webhookSourceSchema>['format'];

/** The deployment's routing document (`capstan:routesFile` in CDK, `CAPSTAN_ROUTES` locally). */
export const routesDocumentSchema = z
  .strictObject({
    rules: z.array(routingRuleSchema).default([]),
    webhooks: z.record(z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/), webhookSourceSchema).default({}),
  })
  .superRefine((doc, ctx) => {
    const seen = new Set<string>();
    doc.rules.forEach((rule, i) => {
      if (seen.has(rule.id)) ctx.addIssue({ code: 'custom', path: ['rules', i, 'id'], message: 'duplicate rule id' });
      seen.add(rule.id);
      for (const [name, template] of Object.entries(rule.inputs))
        for (const problem of templateProblems(template))
          ctx.addIssue({ code: 'custom', path: ['rules', i, 'inputs', name], message: problem });
    });
  });
export type RoutesDocument = z.infer<typeof routesDocumentSchema>;

export const EMPTY_ROUTES: RoutesDocument = { rules: [], webhooks: {} };

/** Parses a routing document from its JSON text; every problem names its path. */
export function parseRoutes(text: string): RoutesDocument {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ValidationError('the routing document is not valid JSON', [
      { path: '', message: (error as Error).message },
    ]);
  }
  const parsed = routesDocumentSchema.safeParse(value);
  if (!parsed.success) throw new ValidationError('the routing document is not valid', issuesFromZod(parsed.error));
  return parsed.data;
}

/** The rules whose runbook is not among `known` (per tenant); empty when every rule can run. */
export function unknownRunbooks(
  doc: RoutesDocument,
  known: (tenantId: string, runbookId: string) => boolean,
  defaultTenant: string | undefined,
): Array<{ ruleId: string; runbook: string; tenant?: string }> {
  return doc.rules.flatMap((rule) => {
    const tenant = rule.tenant ?? defaultTenant;
    return tenant !== undefined && known(tenant, rule.runbook)
      ? []
      : [{ ruleId: rule.id, runbook: rule.runbook, tenant }];
  });
}

const PLACEHOLDER = /\{\{\s*(.*?)\s*\}\}/g;
const REF = /^ticket\.(id|source|type|priority|eventId|fields\.([A-Za-z0-9_.-]+))$/;

function templateProblems(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].flatMap((m) =>
    REF.test(m[1] ?? '')
      ? []
      : [`'{{ ${m[1] ?? ''} }}' is not a ticket placeholder (ticket.id, ticket.type, ticket.fields.<name>, ...)`],
  );
}

const texts = (value: string | string[]) => (Array.isArray(value) ? value : [value]);
const fieldTexts = (value: TicketFieldValue | undefined): string[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [String(value)];

function matches(rule: RoutingRule, ticket: TicketEvent): boolean {
  const { match } = rule;
  if (match.source && !texts(match.source).includes(ticket.source)) return false;
  if (match.type && !texts(match.type).includes(ticket.type)) return false;
  if (match.priority && (ticket.priority === undefined || !texts(match.priority).includes(ticket.priority)))
    return false;
  for (const [name, wanted] of Object.entries(match.fields ?? {})) {
    const held = fieldTexts(ticket.fields[name]);
    if (!texts(wanted).some((w) => held.includes(w))) return false;
  }
  return true;
}

/** The first rule (in document order) that matches the ticket, if any. */
export function matchRule(doc: RoutesDocument, ticket: TicketEvent): RoutingRule | undefined {
  return doc.rules.find((rule) => matches(rule, ticket));
}

/** A ticket placeholder that names nothing the ticket has. */
export class MissingTicketValueError extends ValidationError {}

/**
 * The run inputs a rule gives a ticket. Placeholders are replaced by data; a placeholder that is
 * the whole template keeps a list value as a list. Nothing is evaluated.
 */
export function ruleInputs(rule: RoutingRule, ticket: TicketEvent): Record<string, string | string[]> {
  const missing: Array<{ path: string; message: string }> = [];
  const lookup = (expression: string): TicketFieldValue | undefined => {
    const ref = REF.exec(expression);
    if (!ref) return undefined;
    if (ref[2] !== undefined) return ticket.fields[ref[2]];
    const key = ref[1] as 'id' | 'source' | 'type' | 'priority' | 'eventId';
    return ticket[key];
  };
  const inputs = Object.fromEntries(
    Object.entries(rule.inputs).map(([name, template]) => {
      const whole = /^\{\{\s*(.*?)\s*\}\}$/.exec(template);
      if (whole && !template.slice(2, -2).includes('{{')) {
        const value = lookup(whole[1] ?? '');
        if (value === undefined) missing.push({ path: `inputs.${name}`, message: `the ticket has no ${whole[1]}` });
        return [name, Array.isArray(value) ? value : String(value ?? '')];
      }
      return [
        name,
        template.replace(PLACEHOLDER, (_m, expression: string) => {
          const value = lookup(expression);
          if (value === undefined) missing.push({ path: `inputs.${name}`, message: `the ticket has no ${expression}` });
          return Array.isArray(value) ? value.join(',') : String(value ?? '');
        }),
      ];
    }),
  );
  if (missing.length > 0)
    throw new MissingTicketValueError(`rule '${rule.id}' needs values the ticket does not have`, missing);
  return inputs;
}

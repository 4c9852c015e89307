import { z } from 'zod';
import { ValidationError } from '../errors.js';
import { issuesFromZod } from '../zod-issues.js';
import type { WebhookFormat } from './routing.js';
import { type TicketEvent, ticketEventSchema } from './ticket.js';

/**
 * Payload adapters: a ticket system's webhook body in, Capstan's ticket event out. Each adapter is
 * a pure function; `source` is the webhook's source (authenticated by its key), so a body cannot
 * claim to come from another system.
 */
type Adapter = (body: unknown, source: string) => TicketEvent;

const scalar = z.union([z.string(), z.number(), z.boolean()]);

/** The generic body is the EventBridge detail itself; its `source`, when given, must be the webhook's. */
const generic: Adapter = (body, source) => {
  const withSource = body !== null && typeof body === 'object' && !Array.isArray(body) ? { source, ...body } : body;
  const ticket = parse(ticketEventSchema, withSource);
  if (ticket.source !== source)
    throw new ValidationError('the body names another source', [
      { path: 'body.source', message: `must be '${source}' (the webhook's source) or absent` },
    ]);
  return ticket;
};

/** ServiceNow's numeric priorities, by the names its UI shows. */
const SERVICENOW_PRIORITIES: Readonly<Record<string, string>> = {
  '1': 'critical',
  '2': 'high',
  '3': 'moderate',
  '4': 'low',
  '5': 'planning',
};

const serviceNowIncident = z.looseObject({
  number: z.string().min(1),
  sys_id: z.string().min(1).optional(),
  sys_class_name: z.string().min(1).optional(),
  priority: scalar.optional(),
  sys_mod_count: scalar.optional(),
  sys_updated_on: z.string().optional(),
});

/**
 * A ServiceNow incident, as a business rule's outbound REST message or a Flow Designer action
 * sends it: the record's fields at the top level, or under `result` (the Table API's shape).
 */
const serviceNow: Adapter = (body, source) => {
  const record =
    body !== null && typeof body === 'object' && 'result' in body ? (body as { result: unknown }).result : body;
  const incident = parse(serviceNowIncident, record);
  const fields: Record<string, string> = {};
  for (const [key, value] of Object.entries(incident))
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      fields[key] = String(value);
    else if (value !== null && typeof value === 'object' && 'value' in value)
      // A reference field with display values: `{ "value": "<sys_id>", "display_value": "web-01" }`.
      fields[key] = String((value as { display_value?: unknown; value: unknown }).display_value ?? value.value);
  const priority = incident.priority === undefined ? undefined : String(incident.priority).split(/\s/)[0];
  const version = incident.sys_mod_count ?? incident.sys_updated_on;
  return ticketEventSchema.parse({
    id: incident.number,
    source,
    type: incident.sys_class_name ?? 'incident',
    ...(priority && { priority: SERVICENOW_PRIORITIES[priority] ?? priority.toLowerCase() }),
    fields,
    ...(version !== undefined && { eventId: `${incident.sys_id ?? incident.number}:${String(version)}` }),
  });
};

const named = z.looseObject({ name: z.string() });
const jiraWebhook = z.looseObject({
  webhookEvent: z.string().min(1).optional(),
  timestamp: z.number().optional(),
  issue: z.looseObject({
    id: scalar.optional(),
    key: z.string().min(1),
    fields: z.looseObject({
      issuetype: named,
      priority: named.nullish(),
      project: z.looseObject({ key: z.string() }).optional(),
      status: named.optional(),
      labels: z.array(z.string()).optional(),
      components: z.array(named).optional(),
    }),
  }),
});

/** A Jira Cloud or Data Center issue webhook (`jira:issue_created`, `jira:issue_updated`, ...). */
const jira: Adapter = (body, source) => {
  const hook = parse(jiraWebhook, body);
  const { fields: raw } = hook.issue;
  const fields: Record<string, string | string[]> = {};
  for (const [key, value] of Object.entries(raw))
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      fields[key] = String(value);
  if (raw.project) fields.project = raw.project.key;
  if (raw.status) fields.status = raw.status.name;
  if (raw.labels) fields.labels = raw.labels;
  if (raw.components) fields.components = raw.components.map((c) => c.name);
  return ticketEventSchema.parse({
    id: hook.issue.key,
    source,
    type: raw.issuetype.name.toLowerCase(),
    ...(raw.priority && { priority: raw.priority.name.toLowerCase() }),
    fields,
    ...(hook.timestamp !== undefined && {
      eventId: `${hook.webhookEvent ?? 'event'}:${hook.issue.id ?? hook.issue.key}:${hook.timestamp}`,
    }),
  });
};

const ADAPTERS: Readonly<Record<WebhookFormat, Adapter>> = { generic, servicenow: serviceNow, jira };

/** The format a source's bodies come in: declared in the routing document, else named by the source. */
export function formatOf(source: string, declared: Readonly<Record<string, { format: WebhookFormat }>>): WebhookFormat {
  const format = declared[source]?.format;
  if (format) return format;
  if (source.startsWith('servicenow')) return 'servicenow';
  if (source.startsWith('jira')) return 'jira';
  return 'generic';
}

/** A webhook body as a ticket event; a body its adapter cannot read is a 400 naming the field. */
export function ticketFromWebhook(format: WebhookFormat, body: unknown, source: string): TicketEvent {
  return ADAPTERS[format](body, source);
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new ValidationError('the body is not a ticket this source sends', issuesFromZod(parsed.error, ['body']));
  return parsed.data;
}

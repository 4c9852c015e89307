import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../../shared/domain/errors.js';
import { formatOf, ticketFromWebhook } from '../../../../shared/domain/intake/payloads.js';
import { matchRule, parseRoutes, ruleInputs, unknownRunbooks } from '../../../../shared/domain/intake/routing.js';
import { signWebhook, verifyWebhook } from '../../../../shared/domain/intake/signature.js';
import { ticketEventSchema } from '../../../../shared/domain/intake/ticket.js';

const fixture = (name: string) =>
  JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', '..', 'fixtures', 'intake', name), 'utf8')) as unknown;

const doc = parseRoutes(
  JSON.stringify({
    rules: [
      { id: 'p1', match: { source: 'monitoring', priority: ['critical', 'high'] }, runbook: 'page', priority: 'high' },
      {
        id: 'web',
        match: { fields: { group: 'web' } },
        runbook: 'restart-web',
        inputs: { host: '{{ ticket.fields.host }}' },
      },
      {
        id: 'any-alert',
        match: { type: 'alert' },
        runbook: 'hello',
        tenant: 'acme',
        inputs: { who: 'ticket {{ ticket.id }}' },
      },
    ],
  }),
);
const ticket = (over: Record<string, unknown>) =>
  ticketEventSchema.parse({ id: 'T-1', source: 'monitoring', type: 'alert', ...over });

describe('routing rules', () => {
  it('takes the first rule whose every condition holds', () => {
    expect(matchRule(doc, ticket({ priority: 'high' }))?.id).toBe('p1');
    expect(matchRule(doc, ticket({ priority: 'low', fields: { group: 'web' } }))?.id).toBe('web');
    expect(matchRule(doc, ticket({ priority: 'low' }))?.id).toBe('any-alert');
    expect(matchRule(doc, ticket({ type: 'change' }))).toBeUndefined();
  });

  it('matches a list field when it holds one of the wanted values', () => {
    const labelled = parseRoutes(
      JSON.stringify({ rules: [{ id: 'l', match: { fields: { labels: 'db' } }, runbook: 'x' }] }),
    );
    expect(matchRule(labelled, ticket({ fields: { labels: ['web', 'db'] } }))?.id).toBe('l');
    expect(matchRule(labelled, ticket({ fields: { labels: ['web'] } }))).toBeUndefined();
  });

  it('maps ticket values to inputs as data', () => {
    const web = doc.rules[1]!;
    expect(ruleInputs(web, ticket({ fields: { host: 'web-01; rm -rf /' } }))).toEqual({ host: 'web-01; rm -rf /' });
    expect(ruleInputs(doc.rules[2]!, ticket({}))).toEqual({ who: 'ticket T-1' });
  });

  it('refuses to map a value the ticket does not have, naming the input', () => {
    expect(() => ruleInputs(doc.rules[1]!, ticket({}))).toThrow(ValidationError);
  });

  it('rejects a document with an unknown placeholder, a duplicate id or an unknown field, naming the path', () => {
    const bad = (rules: unknown) => () => parseRoutes(JSON.stringify({ rules }));
    expect(bad([{ id: 'a', runbook: 'x', inputs: { h: '{{ inputs.x }}' } }])).toThrow(ValidationError);
    expect(
      bad([
        { id: 'a', runbook: 'x' },
        { id: 'a', runbook: 'y' },
      ]),
    ).toThrow(/not valid/);
    expect(bad([{ id: 'a', runbook: 'x', when: {} }])).toThrow(ValidationError);
    expect(() => parseRoutes('{')).toThrow(/not valid JSON/);
  });

  it('names the rules whose runbook is unknown for their tenant', () => {
    const known = (tenant: string, runbook: string) => tenant === 'acme' && runbook === 'hello';
    expect(unknownRunbooks(doc, known, 'platform').map((p) => p.ruleId)).toEqual(['p1', 'web']);
    expect(unknownRunbooks(doc, () => true, undefined).map((p) => p.ruleId)).toEqual(['p1', 'web']);
  });
});

describe('payload adapters', () => {
  it('reads a ServiceNow incident with its priority name and reference display values', () => {
    const t = ticketFromWebhook('servicenow', fixture('servicenow-incident.json'), 'servicenow');
    expect(t).toMatchObject({ id: 'INC0010042', source: 'servicenow', type: 'incident', priority: 'high' });
    expect(t.fields).toMatchObject({ cmdb_ci: 'orders-api', category: 'software' });
    expect(t.eventId).toBe('9d385017c611228701d22104cc95c371:3');
  });

  it('reads a Jira issue webhook with its type, priority, labels and components', () => {
    const t = ticketFromWebhook('jira', fixture('jira-issue-created.json'), 'jira');
    expect(t).toMatchObject({ id: 'OPS-42', type: 'bug', priority: 'high' });
    expect(t.fields).toMatchObject({
      summary: 'checkout latency',
      project: 'OPS',
      labels: ['checkout', 'latency'],
      components: ['web'],
    });
  });

  it('refuses a generic body that names another source or lacks an id', () => {
    expect(() => ticketFromWebhook('generic', { id: 'X', source: 'other', type: 'a' }, 'generic')).toThrow(
      /another source/,
    );
    expect(() => ticketFromWebhook('generic', { type: 'a' }, 'generic')).toThrow(ValidationError);
  });

  it('chooses the format declared for a source, else the one its name says', () => {
    expect(formatOf('servicenow-eu', {})).toBe('servicenow');
    expect(formatOf('tracker', { tracker: { format: 'jira' } })).toBe('jira');
    expect(formatOf('pagerduty', {})).toBe('generic');
  });
});

describe('webhook signatures', () => {
  const body = '{"id":"X"}';
  const now = 1_746_000_000;
  const signed = signWebhook('k', String(now), body);

  it('accepts a good signature within the window', () => {
    expect(verifyWebhook({ key: 'k', body, signature: signed, timestamp: String(now), nowSeconds: now + 299 })).toEqual(
      { ok: true },
    );
  });

  it('refuses another key, another body, a stale timestamp and missing headers', () => {
    const check = (over: Partial<Parameters<typeof verifyWebhook>[0]>) =>
      verifyWebhook({ key: 'k', body, signature: signed, timestamp: String(now), nowSeconds: now, ...over });
    expect(check({ key: 'other' })).toEqual({ ok: false, reason: 'mismatch' });
    expect(check({ body: '{"id":"Y"}' })).toEqual({ ok: false, reason: 'mismatch' });
    expect(check({ nowSeconds: now + 301 })).toEqual({ ok: false, reason: 'stale' });
    expect(check({ signature: undefined })).toEqual({ ok: false, reason: 'missing' });
    expect(check({ signature: 'sha256=zz' })).toEqual({ ok: false, reason: 'malformed' });
  });
});

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invocationCounts } from '../../local/lambdas.js';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { signWebhook } from '../../shared/domain/intake/signature.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { callApi, until } from '../support/stack-api.js';

let stack: LocalStack;
let home: string;
let port: number;
let operator: string;
let otherTenant: string;
let bus: EventBridgeClient;
const log: string[] = [];
const fixture = (name: string) => readFileSync(join(import.meta.dirname, '..', 'fixtures', 'intake', name), 'utf8');
const KEYS = { generic: 'local-generic-webhook-key-change-me', servicenow: 'local-servicenow-webhook-key-change-me' };

const routes = (demoUrl: string) => ({
  rules: [
    {
      id: 'alerts',
      match: { source: 'monitoring', type: 'alert' },
      runbook: 'hello',
      inputs: { who: '{{ ticket.fields.host }}' },
    },
    {
      id: 'incidents',
      match: { source: 'servicenow', type: 'incident' },
      runbook: 'ticket-enrichment',
      inputs: { ticket_id: '{{ ticket.id }}', service_url: demoUrl },
    },
    { id: 'bugs', match: { source: 'jira', type: 'bug', fields: { labels: 'checkout' } }, runbook: 'hello' },
    { id: 'generic', match: { source: 'generic' }, runbook: 'hello', inputs: { who: 'webhook {{ ticket.id }}' } },
    { id: 'deploys', match: { source: 'monitoring', type: 'deploy' }, runbook: 'hello', onActive: 'queue' },
  ],
});

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-intake-'));
  port = await freePortBlock();
  stack = await startLocalStack({
    port,
    stateDir: home,
    fresh: true,
    workers: { 'dev-flex': 1 },
    reconcileIntervalMs: 3_600_000,
    env: { CAPSTAN_ROUTES: JSON.stringify(routes(`http://127.0.0.1:${port + 8}`)) },
    log: (line) => log.push(line),
  });
  operator = stack.issuer.tokens.operator!;
  otherTenant = stack.issuer.tokens.otherTenant!;
  bus = new EventBridgeClient({ endpoint: stack.endpoints.EVENTBRIDGE, region: 'us-east-1' });
  for (const file of ['hello.yaml', 'ticket-enrichment.json']) {
    const text = readFileSync(join(import.meta.dirname, '..', '..', 'examples', 'runbooks', file), 'utf8');
    const reply = await callApi(
      stack.restUrl,
      operator,
      'POST',
      '/runbooks',
      file.endsWith('.json') ? JSON.parse(text) : text,
    );
    expect(reply.status).toBeLessThan(300);
  }
  const slow = {
    name: 'slow',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [{ id: 'wait', backend: 'test', action: 'sleep', params: { ms: 4000 } }],
  };
  expect((await callApi(stack.restUrl, operator, 'POST', '/runbooks', slow)).status).toBeLessThan(300);
}, 90_000);

afterAll(async () => {
  bus?.destroy();
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}, as = operator) =>
  callApi(stack.restUrl, as, method, path, body, headers);
const context = () => log.slice(-20).join('\n');

async function ticketRuns(ticket: string, as = operator) {
  const reply = await api('GET', `/runs?ticket=${encodeURIComponent(ticket)}`, undefined, {}, as);
  expect(reply.status).toBe(200);
  return reply.body.runs as Array<Record<string, unknown>>;
}

async function waitForStatus(runId: string, statuses: string[]) {
  let last: Record<string, unknown> = {};
  return until(
    `run ${runId} in ${statuses.join('|')}`,
    async () => {
      const { body } = await api('GET', `/runs/${runId}`);
      last = body;
      return statuses.includes(String(body.status)) ? body : undefined;
    },
    60_000,
    () =>
      `last seen: ${JSON.stringify({ status: last.status, waitingFor: last.waitingFor, error: last.error })}\n${context()}`,
  );
}

function postWebhook(source: string, body: string, options: { key?: string; timestamp?: number } = {}) {
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const signature = signWebhook(options.key ?? KEYS.generic, timestamp, body);
  return send(source, body, { 'x-capstan-signature': signature, 'x-capstan-timestamp': timestamp });
}

async function send(source: string, body: string, headers: Record<string, string>) {
  const response = await fetch(`${stack.restUrl}/webhooks/${source}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown>, headers };
}

describe('EventBridge intake', () => {
  it('creates exactly one run for a matching ticket event sent three times', async () => {
    const before = invocationCounts['ticket-ingest'] ?? 0;
    const detail = { id: 'ALERT-1', source: 'monitoring', type: 'alert', fields: { host: 'web-01' }, eventId: 'evt-1' };
    for (let i = 0; i < 3; i++) {
      const sent = await bus.send(
        new PutEventsCommand({
          Entries: [
            {
              Source: 'monitoring',
              DetailType: 'Ticket',
              Detail: JSON.stringify(detail),
              EventBusName: 'capstan-events',
            },
          ],
        }),
      );
      expect(sent.FailedEntryCount).toBe(0);
    }
    await until(
      'three deliveries',
      async () => ((invocationCounts['ticket-ingest'] ?? 0) - before >= 3 ? true : undefined),
      30_000,
      context,
    );
    const runs = await until('the ticket run', async () => {
      const found = await ticketRuns('ALERT-1');
      return found.length > 0 ? found : undefined;
    });
    expect(runs).toHaveLength(1);
    const run = runs[0]!;
    expect(run).toMatchObject({
      runbookId: 'hello',
      inputs: { who: 'web-01' },
      ticket: { id: 'ALERT-1', source: 'monitoring' },
      trigger: { type: 'eventbridge', source: 'monitoring', ref: 'ALERT-1#evt-1' },
    });
    await waitForStatus(String(run.runId), ['succeeded']);
  });

  it('queues a ticket event behind the ticket’s active run when its rule says so, and starts it when that run ends', async () => {
    const sendDeploy = (eventId: string) =>
      bus.send(
        new PutEventsCommand({
          Entries: [
            {
              Source: 'monitoring',
              DetailType: 'Ticket',
              Detail: JSON.stringify({ id: 'DEP-1', source: 'monitoring', type: 'deploy', eventId }),
            },
          ],
        }),
      );
    // Paused, the first run holds the ticket (throttled) until the test lets it go.
    const control = { source: 'hello', reason: 'hold the first deploy' };
    expect((await api('POST', '/limits/pause', control)).status).toBe(200);
    let runs: Array<Record<string, unknown>> = [];
    let first: Record<string, unknown> | undefined;
    try {
      await sendDeploy('d-1');
      [first] = await until('the first run of DEP-1', async () => {
        const found = await ticketRuns('DEP-1');
        return found.length === 1 ? found : undefined;
      });
      await waitForStatus(String(first?.runId), ['throttled']);
      await sendDeploy('d-2');
      await sendDeploy('d-3');
      runs = await until('three runs of DEP-1', async () => {
        const found = await ticketRuns('DEP-1');
        return found.length === 3 ? found : undefined;
      });
      const second = runs.find((r) => r.runId !== first?.runId && r.queuedBehind === first?.runId);
      expect(second, JSON.stringify(runs)).toBeDefined();
      const waiting = (await api('GET', `/runs/${String(second?.runId)}`)).body;
      expect(waiting.status).toBe('queued');
      expect(waiting.waitingFor).toEqual({ kind: 'ticket', ticketId: 'DEP-1', behind: first?.runId });
    } finally {
      // The other tests route to hello too.
      expect((await api('POST', '/limits/resume', control)).status).toBe(200);
    }
    const ids = runs.map((r) => String(r.runId));
    for (const id of ids) await waitForStatus(id, ['succeeded']);
    // One active run per ticket at every instant: the three runs' lifetimes do not overlap.
    const spans = await Promise.all(
      ids.map(async (id) => {
        const events = (await api('GET', `/runs/${id}/events?limit=1000`)).body.events as Array<{
          type: string;
          timestamp: string;
        }>;
        const at = (type: string) => Date.parse(events.find((e) => e.type === type)?.timestamp ?? '');
        return { id, started: at('run.started'), ended: at('run.succeeded') };
      }),
    );
    spans.sort((a, b) => a.started - b.started);
    expect(spans[0]?.id).toBe(first?.runId);
    for (let i = 1; i < spans.length; i++) expect(spans[i]!.started).toBeGreaterThanOrEqual(spans[i - 1]!.ended);
  }, 90_000);

  it('records and reports a ticket no rule matches', async () => {
    const detail = { id: 'CHG-9', source: 'monitoring', type: 'change' };
    await bus.send(
      new PutEventsCommand({
        Entries: [{ Source: 'monitoring', DetailType: 'Ticket', Detail: JSON.stringify(detail) }],
      }),
    );
    const reported = await until('the unrouted record', async () => {
      const { body } = await api('GET', '/intake/unrouted');
      const tickets = body.tickets as Array<Record<string, unknown>>;
      return tickets.find((t) => t.ticketId === 'CHG-9');
    });
    expect(reported).toMatchObject({ reason: 'unmatched', via: 'eventbridge', source: 'monitoring' });
    expect(await ticketRuns('CHG-9')).toHaveLength(0);
    expect((await api('GET', '/intake/unrouted', undefined, {}, otherTenant)).status).toBe(403);
  });
});

describe('signed webhooks', () => {
  it('answers 202 with a run for a good signature, and the same run for a redelivery', async () => {
    const body = JSON.stringify({ id: 'GEN-1', type: 'request', eventId: 'e-1' });
    // A redelivery is signed anew: its timestamp differs from the first delivery's, whatever the clock did between.
    const sentAt = Math.floor(Date.now() / 1000);
    const first = await postWebhook('generic', body, { timestamp: sentAt });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ rule: 'generic', duplicate: false });
    const again = await postWebhook('generic', body, { timestamp: sentAt - 1 });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ runId: first.body.runId, duplicate: true });
    const { body: run } = await api('GET', `/runs/${String(first.body.runId)}`);
    expect(run).toMatchObject({ inputs: { who: 'webhook GEN-1' }, trigger: { type: 'webhook', source: 'generic' } });
    await waitForStatus(String(first.body.runId), ['succeeded']);
  });

  it('refuses a bad signature, a stale timestamp and a replayed request with 401 and starts nothing', async () => {
    const body = JSON.stringify({ id: 'GEN-2', type: 'request' });
    expect((await postWebhook('generic', body, { key: 'not-the-key' })).status).toBe(401);
    expect((await postWebhook('generic', body, { timestamp: Math.floor(Date.now() / 1000) - 301 })).status).toBe(401);
    expect((await send('generic', body, {})).status).toBe(401);
    expect((await postWebhook('unknown-source', body)).status).toBe(401);
    expect(await ticketRuns('GEN-2')).toHaveLength(0);

    const replayedBody = JSON.stringify({ id: 'GEN-3', type: 'request' });
    const accepted = await postWebhook('generic', replayedBody);
    expect(accepted.status).toBe(202);
    const replay = await send('generic', replayedBody, accepted.headers);
    expect(replay.status).toBe(401);
    expect(await ticketRuns('GEN-3')).toHaveLength(1);
  });

  it('answers 400 for a body that is not a ticket', async () => {
    const reply = await postWebhook('generic', JSON.stringify({ type: 'request' }));
    expect(reply.status).toBe(400);
    expect(JSON.stringify(reply.body)).toContain('body.id');
    expect((await postWebhook('generic', '{not json')).status).toBe(400);
  });

  it('routes a ServiceNow incident and a Jira issue to their runbooks', async () => {
    const incident = await postWebhook('servicenow', fixture('servicenow-incident.json'), { key: KEYS.servicenow });
    expect(incident.status).toBe(202);
    const snow = await waitForStatus(String(incident.body.runId), ['succeeded']);
    expect(snow).toMatchObject({ runbookId: 'ticket-enrichment', inputs: { ticket_id: 'INC0010042' } });

    const issue = await postWebhook('jira', fixture('jira-issue-created.json'), {
      key: 'local-jira-webhook-key-change-me',
    });
    expect(issue.status).toBe(202);
    const { body: jira } = await api('GET', `/runs/${String(issue.body.runId)}`);
    expect(jira).toMatchObject({ runbookId: 'hello', ticket: { id: 'OPS-42', source: 'jira' } });
  });
});

describe('one active run per ticket', () => {
  it('refuses a second run for a ticket with an active run, naming the first, and lists runs by ticket per tenant', async () => {
    const create = (key: string, as = operator) =>
      api(
        'POST',
        '/runs',
        { runbookId: 'slow', ticket: { id: 'INC-1', source: 'cli' } },
        { 'idempotency-key': key },
        as,
      );
    const first = await create('inc-1-a');
    expect(first.status).toBe(202);
    const second = await create('inc-1-b');
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ details: { activeRunId: first.body.runId } });

    // The same refusal through EventBridge is recorded with the active run.
    await bus.send(
      new PutEventsCommand({
        Entries: [
          {
            Source: 'monitoring',
            DetailType: 'Ticket',
            Detail: JSON.stringify({ id: 'INC-1', source: 'monitoring', type: 'alert', fields: { host: 'h' } }),
          },
        ],
      }),
    );
    const refused = await until('the refusal record', async () => {
      const { body } = await api('GET', '/intake/unrouted');
      return (body.tickets as Array<Record<string, unknown>>).find((t) => t.ticketId === 'INC-1');
    });
    expect(refused).toMatchObject({ reason: 'active_run', activeRunId: first.body.runId });

    const runs = await ticketRuns('INC-1');
    expect(runs.map((r) => r.runId)).toEqual([first.body.runId]);
    expect(await ticketRuns('INC-1', otherTenant)).toHaveLength(0);

    await waitForStatus(String(first.body.runId), ['succeeded']);
    const third = await create('inc-1-c');
    expect(third.status).toBe(202);
    expect((await ticketRuns('INC-1')).map((r) => r.runId)).toEqual([third.body.runId, first.body.runId]);
  });

  it('lets exactly one of many concurrent runs for one ticket through', async () => {
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        api(
          'POST',
          '/runs',
          { runbookId: 'hello', ticket: { id: 'RACE-1', source: 'cli' } },
          { 'idempotency-key': `race-${i}` },
        ),
      ),
    );
    const accepted = replies.filter((r) => r.status === 202);
    expect(accepted).toHaveLength(1);
    for (const refused of replies.filter((r) => r.status !== 202)) {
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ details: { activeRunId: accepted[0]!.body.runId } });
    }
  });
});

describe('lifecycle out', () => {
  it('publishes a run lifecycle on the bus in order, with its ticket and tenant', async () => {
    const body = JSON.stringify({ id: 'GEN-LIFE', type: 'request' });
    const reply = await postWebhook('generic', body);
    const runId = String(reply.body.runId);
    await waitForStatus(runId, ['succeeded']);
    const published = await until('the lifecycle events', async () => {
      const lines = readFileSync(join(home, 'data', 'eventbridge.jsonl'), 'utf8')
        .trim()
        .split('\n');
      const mine = lines
        .map((line) => JSON.parse(line) as { source: string; detailType: string; detail: Record<string, unknown> })
        .filter((e) => e.source === 'capstan' && e.detail.runId === runId);
      return mine.some((e) => e.detailType === 'run.succeeded') ? mine : undefined;
    });
    expect(published.map((e) => e.detailType)).toEqual(['run.created', 'run.started', 'run.succeeded']);
    expect(published[0]!.detail).toMatchObject({ tenantId: 'local', ticket: { id: 'GEN-LIFE', source: 'generic' } });
  });
});

describe('routing check at start', () => {
  it('fails the start when a rule names an unknown runbook', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capstan-intake-bad-'));
    try {
      await expect(
        startLocalStack({
          port: await freePortBlock(),
          stateDir: dir,
          fresh: true,
          workers: {},
          reconcileIntervalMs: 3_600_000,
          env: { CAPSTAN_ROUTES: JSON.stringify({ rules: [{ id: 'bad', runbook: 'no-such-runbook' }] }) },
          log: () => undefined,
        }),
      ).rejects.toThrow(/rule 'bad' -> 'no-such-runbook'/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

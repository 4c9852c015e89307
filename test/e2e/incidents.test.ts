import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

/**
 * Circuit breakers and incidents on the local stack: a runbook failing 6 of its last 10 runs
 * opens its breaker (incident event and notify webhook), a probe goes through after a 3-second
 * cooldown and closes it, a failed probe re-opens it, and a reset closes it; a failed run of an
 * escalating runbook raises an incident that an operator acknowledges. Alerts go to the demo
 * service's `/hooks/notify`, the local stack's default receiver.
 */
let stack: LocalStack;
let home: string;
const log: string[] = [];
const COOLDOWN_SECONDS = 3;

beforeAll(async () => {
  ({ stack, home } = await startTestStack('incidents', {
    workers: { 'dev-flex': 2 },
    reconcileIntervalMs: 3_600_000,
    admitIntervalMs: 300,
    env: { CAPSTAN_BREAKER_COOLDOWN_SECONDS: String(COOLDOWN_SECONDS) },
    log: (line) => log.push(line),
  }));
}, 60_000);

afterAll(() => stopTestStack(stack, home));

const api = (method: string, path: string, body?: unknown, who = 'operator') =>
  callApi(stack.restUrl, stack.issuer.tokens[who] ?? '', method, path, body);

const until = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000) =>
  waitUntil(what, probe, timeoutMs, () =>
    log
      .filter((l) => !l.startsWith('step functions'))
      .slice(-30)
      .join('\n'),
  );

async function create(runbookId: string, inputs: Record<string, unknown> = {}) {
  const response = await api('POST', '/runs', { runbookId, inputs });
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return { runId: String(response.body.runId), status: String(response.body.status) };
}

const ENDED = ['succeeded', 'failed', 'cancelled'];
const ended = (runId: string, timeoutMs = 60_000) =>
  until(
    `run ${runId} to end`,
    async () => {
      const { body } = await api('GET', `/runs/${runId}`);
      return ENDED.includes(String(body.status)) ? body : undefined;
    },
    timeoutMs,
  );

const events = async (runId: string) =>
  (await api('GET', `/runs/${runId}/events?limit=1000`)).body.events as RunEvent[];

async function breaker(runbookId: string) {
  const list = (await api('GET', '/breakers')).body.breakers as Array<Record<string, unknown>>;
  return list.find((b) => b.runbookId === runbookId);
}

const breakerIn = (runbookId: string, state: string, timeoutMs = 30_000) =>
  until(
    `breaker ${runbookId} ${state}`,
    async () => {
      const found = await breaker(runbookId);
      return found?.state === state ? found : undefined;
    },
    timeoutMs,
  );

const notified = (text: string) =>
  until(`a notify webhook message with '${text}'`, async () =>
    stack.demo.messages('notify').find((m) => m.includes(text)),
  );

describe('circuit breakers', () => {
  it('opens on 6 failures in 10 runs with an incident, half-opens after the cooldown, closes on success, re-opens on a failed probe, and resets', async () => {
    const doc = {
      name: 'brk',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      inputs: { fails: { type: 'number', default: 0 }, ms: { type: 'number', default: 0 } },
      steps: [
        { id: 'wait', backend: 'test', action: 'sleep', params: { ms: '{{ inputs.ms }}' } },
        { id: 'work', backend: 'test', action: 'flaky', params: { fail_times: '{{ inputs.fails }}' }, retries: 0 },
      ],
    };
    expect((await api('POST', '/runbooks', doc)).status).toBeLessThan(300);
    const outcomes = [0, 1, 0, 1, 1, 0, 1, 0, 1, 1];
    const first = await Promise.all(outcomes.map((fails) => create('brk', { fails })));
    const statuses = await Promise.all(first.map(async (r) => String((await ended(r.runId)).status)));
    expect(statuses.filter((s) => s === 'failed')).toHaveLength(6);

    const open = await breakerIn('brk', 'open');
    expect(Date.parse(String(open.openUntil)) - Date.parse(String(open.openedAt))).toBe(COOLDOWN_SECONDS * 1000);
    // The run whose end opened it carries the incident.
    const flagged = await until('the run that opened the breaker to carry an incident', async () => {
      const details = await Promise.all(first.map(async (r) => (await api('GET', `/runs/${r.runId}`)).body));
      return details.find((d) => (d.incident as { reason?: string } | undefined)?.reason === 'breaker_opened');
    });
    const incident = (await events(String(flagged.runId))).find((e) => e.type === 'run.incident');
    expect(incident?.payload).toMatchObject({ kind: 'breaker_opened', runbookId: 'brk' });
    expect(await notified('circuit breaker opened for runbook brk')).toContain(String(flagged.runId));

    // Held while open; after the cooldown one probe goes through (half-open) and its success closes it.
    const probe = await create('brk', { fails: 0, ms: 3000 });
    expect(probe.status).toBe('throttled');
    const held = (await events(probe.runId)).find((e) => e.type === 'run.throttled');
    expect(held?.payload).toMatchObject({ limit: 'breaker', source: 'brk' });
    const half = await breakerIn('brk', 'half_open', 20_000).catch(async (e: Error) => {
      throw new Error(
        `${e.message}\n${JSON.stringify(await events(probe.runId))}\n${JSON.stringify(await breaker('brk'))}`,
      );
    });
    expect(half.probeRunId).toBe(probe.runId);
    const admitted = (await events(probe.runId)).find((e) => e.type === 'run.admitted');
    expect(Date.parse(String(admitted?.timestamp))).toBeGreaterThanOrEqual(Date.parse(String(open.openUntil)));
    expect((await ended(probe.runId)).status).toBe('succeeded');
    await breakerIn('brk', 'closed');

    // Ten failures open it again; a failed probe re-opens it for another cooldown.
    const again = await Promise.all(Array.from({ length: 10 }, () => create('brk', { fails: 1 })));
    for (const r of again) await ended(r.runId);
    const reopened = await breakerIn('brk', 'open');
    const failingProbe = await create('brk', { fails: 1, ms: 500 });
    expect(failingProbe.status).toBe('throttled');
    expect((await ended(failingProbe.runId)).status).toBe('failed');
    const afterProbe = await breakerIn('brk', 'open');
    expect(String(afterProbe.openedAt) > String(reopened.openedAt)).toBe(true);

    // A reset closes it at once and admits what it held.
    const waiting = await create('brk', { fails: 0 });
    expect(waiting.status).toBe('throttled');
    const reset = await api('POST', '/breakers/brk/reset', { reason: 'fixed the dependency' });
    expect(reset.status).toBe(200);
    expect(reset.body.state).toBe('closed');
    expect((await ended(waiting.runId)).status).toBe('succeeded');
  }, 240_000);
});

describe('incidents', () => {
  it('raises an incident when a run of an escalating runbook fails, and an operator acknowledges it once', async () => {
    const doc = (name: string, escalate: boolean) => ({
      name,
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      escalate_on_failure: escalate,
      steps: [{ id: 'boom', backend: 'test', action: 'fail', params: { message: 'disk full' }, retries: 0 }],
    });
    for (const [name, escalate] of [
      ['esc', true],
      ['quiet', false],
    ] as const)
      expect((await api('POST', '/runbooks', doc(name, escalate))).status).toBeLessThan(300);
    const loud = await create('esc');
    const quiet = await create('quiet');
    expect((await ended(loud.runId)).status).toBe('failed');
    expect((await ended(quiet.runId)).status).toBe('failed');

    const flagged = await until('the incident flag', async () => {
      const { body } = await api('GET', `/runs/${loud.runId}`);
      return body.incident as Record<string, unknown> | undefined;
    });
    expect(flagged).toMatchObject({ reason: 'run_failed' });
    expect(await notified(`Run: <`)).toBeDefined();
    const message = await notified(loud.runId);
    expect(message).toContain('INCIDENT: run of esc failed');
    expect(message).toContain('disk full');

    expect((await api('POST', `/runs/${loud.runId}/incident/ack`, undefined, 'approver')).status).toBe(403);
    expect((await api('POST', `/runs/${loud.runId}/incident/ack`, undefined, 'otherTenant')).status).toBe(404);
    const ack = await api('POST', `/runs/${loud.runId}/incident/ack`);
    expect(ack.status).toBe(200);
    expect(ack.body).toMatchObject({ reason: 'run_failed', acknowledgedBy: expect.any(String) });
    expect((await api('POST', `/runs/${loud.runId}/incident/ack`)).status).toBe(409);
    const acknowledged = (await events(loud.runId)).filter((e) => e.type === 'run.incident_acknowledged');
    expect(acknowledged.map((e) => e.payload.actor)).toEqual([ack.body.acknowledgedBy]);
    expect((await api('GET', `/runs/${loud.runId}`)).body.incident).toEqual(ack.body);

    // A runbook that does not ask for it raises none.
    expect((await api('GET', `/runs/${quiet.runId}`)).body.incident).toBeUndefined();
    expect((await api('POST', `/runs/${quiet.runId}/incident/ack`)).status).toBe(409);
  }, 90_000);
});

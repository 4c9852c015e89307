import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { callApi, until } from '../support/stack-api.js';

let stack: LocalStack;
let home: string;
let operator: string;
let admin: string;
const log: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-admission-'));
  stack = await startLocalStack({
    port: await freePortBlock(),
    stateDir: home,
    fresh: true,
    workers: { 'dev-flex': 2 },
    reconcileIntervalMs: 3_600_000,
    admitIntervalMs: 500,
    log: (line) => log.push(line),
  });
  operator = stack.issuer.tokens.operator!;
  admin = stack.issuer.tokens.admin!;
}, 60_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

const api = (method: string, path: string, body?: unknown, as = operator) =>
  callApi(stack.restUrl, as, method, path, body);

async function register(name: string, step: Record<string, unknown> = { action: 'echo', params: { message: 'ok' } }) {
  const doc = {
    name,
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [{ id: 'only', backend: 'test', ...step }],
  };
  expect((await api('POST', '/runbooks', doc)).status).toBeLessThan(300);
}

async function create(body: Record<string, unknown>) {
  const response = await api('POST', '/runs', body);
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return { runId: String(response.body.runId), status: String(response.body.status) };
}

const statusOf = async (runId: string) => String((await api('GET', `/runs/${runId}`)).body.status);

async function allEnded(runIds: readonly string[], timeoutMs: number) {
  return until(
    `${runIds.length} runs to end`,
    async () => {
      const statuses = await Promise.all(runIds.map(statusOf));
      return statuses.every((s) => ['succeeded', 'failed', 'cancelled'].includes(s)) ? statuses : undefined;
    },
    timeoutMs,
    () => log.slice(-20).join('\n'),
  );
}

async function events(runId: string): Promise<RunEvent[]> {
  return (await api('GET', `/runs/${runId}/events?limit=1000`)).body.events as RunEvent[];
}

/** The most runs active at once, from `run.started` to the run's end, by event timestamps. */
function peakActive(logs: readonly RunEvent[][]): number {
  const edges = logs.flatMap((list) => {
    const started = list.find((e) => e.type === 'run.started');
    const ended = list.find((e) => ['run.succeeded', 'run.failed', 'run.cancelled'].includes(e.type));
    return started && ended
      ? [
          { at: Date.parse(started.timestamp), delta: 1 },
          { at: Date.parse(ended.timestamp), delta: -1 },
        ]
      : [];
  });
  // An end and a start at the same millisecond: the slot was freed first.
  edges.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let active = 0;
  let peak = 0;
  for (const edge of edges) peak = Math.max(peak, (active += edge.delta));
  return peak;
}

describe('admission control on the local stack', () => {
  it('keeps 60 concurrent runs to maxActive 3 at every instant, throttles the rest and admits them all', async () => {
    await register('adm-noop');
    expect((await api('PUT', '/quotas/adm-noop', { runbook: 'adm-noop', maxActive: 3 }, admin)).status).toBe(200);
    const started = Date.now();
    const runs = await Promise.all(Array.from({ length: 60 }, () => create({ runbookId: 'adm-noop' })));
    const statuses = await allEnded(
      runs.map((r) => r.runId),
      110_000,
    );
    expect(statuses.every((s) => s === 'succeeded')).toBe(true);
    const logs = await Promise.all(runs.map((r) => events(r.runId)));
    const peak = peakActive(logs);
    const throttled = logs.filter((list) => list.some((e) => e.type === 'run.throttled'));
    console.log(
      `maxActive 3: 60 runs in ${Date.now() - started} ms, peak active ${peak}, throttled ${throttled.length}`,
    );
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThanOrEqual(1);
    expect(throttled.length).toBeGreaterThanOrEqual(50);
    for (const list of throttled) {
      const event = list.find((e) => e.type === 'run.throttled');
      expect(event?.payload.limit).toBe('maxActive');
      expect(Date.parse(String(event?.payload.nextEligibleAt))).toBeGreaterThan(0);
      expect(list.some((e) => e.type === 'run.admitted')).toBe(true);
    }
  }, 150_000);

  it('lets an emergency run skip a full backlog within its own allowance', async () => {
    await register('adm-slow', { action: 'sleep', params: { ms: 3000 } });
    await api('PUT', '/quotas/adm-slow', { runbook: 'adm-slow', maxActive: 1, emergency: { maxActive: 1 } }, admin);
    const first = await create({ runbookId: 'adm-slow' });
    const second = await create({ runbookId: 'adm-slow' });
    const urgent = await create({ runbookId: 'adm-slow', priority: 'emergency' });
    const another = await create({ runbookId: 'adm-slow', priority: 'emergency' });
    expect([first.status, second.status, urgent.status, another.status]).toEqual([
      'queued',
      'throttled',
      'queued',
      'throttled',
    ]);
    expect(await allEnded([first.runId, second.runId, urgent.runId, another.runId], 60_000)).toEqual([
      'succeeded',
      'succeeded',
      'succeeded',
      'succeeded',
    ]);
  }, 90_000);

  it('refuses exactly the excess over maxPerHour and over burst', async () => {
    await register('adm-hourly');
    await api('PUT', '/quotas/adm-hourly', { runbook: 'adm-hourly', maxPerHour: 5 }, admin);
    const hourly = [];
    for (let i = 0; i < 8; i++) hourly.push(await create({ runbookId: 'adm-hourly' }));
    expect(hourly.filter((r) => r.status === 'throttled')).toHaveLength(3);
    const held = await events(hourly[7]!.runId);
    expect(held.find((e) => e.type === 'run.throttled')?.payload.limit).toBe('maxPerHour');

    await register('adm-burst');
    await api('PUT', '/quotas/adm-burst', { runbook: 'adm-burst', burst: 4, maxPerHour: 1000 }, admin);
    const burst = await Promise.all(Array.from({ length: 7 }, () => create({ runbookId: 'adm-burst' })));
    const refused = burst.filter((r) => r.status === 'throttled');
    expect(refused).toHaveLength(3);
    const reasons = await Promise.all(
      refused.map(async (r) => (await events(r.runId)).find((e) => e.type === 'run.throttled')?.payload.limit),
    );
    expect(reasons.every((limit) => limit === 'burst')).toBe(true);
  }, 60_000);

  it('holds a paused runbook’s new runs and starts them on resume, with both changes in the limits', async () => {
    await register('adm-paused');
    expect((await api('POST', '/limits/pause', { source: 'adm-paused', reason: 'maintenance' })).status).toBe(200);
    expect((await api('GET', '/limits')).body.limits).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'pause', source: 'adm-paused', reason: 'maintenance' })]),
    );
    const held = await create({ runbookId: 'adm-paused' });
    expect(held.status).toBe('throttled');
    expect((await events(held.runId)).find((e) => e.type === 'run.throttled')?.payload.limit).toBe('paused');
    expect(await statusOf(held.runId)).toBe('throttled');
    expect((await api('POST', '/limits/resume', { source: 'adm-paused', reason: 'done' })).status).toBe(200);
    expect(await allEnded([held.runId], 30_000)).toEqual(['succeeded']);
  }, 60_000);

  it('holds a source throttled to 6 runs a minute to 6 admissions in each clock minute', async () => {
    await register('adm-rate');
    // Eight runs at once must land in one clock minute: start with at least 15 s of it left.
    await until('a clock minute with 15 s left', async () => (Date.now() % 60_000 < 45_000 ? true : undefined), 20_000);
    const ends = new Date(Date.now() + 10 * 60_000).toISOString();
    const throttle = { source: 'adm-rate', maxPerMinute: 6, until: ends, reason: 'protect the backend' };
    expect((await api('POST', '/limits/throttle', throttle)).status).toBe(200);
    const runs = await Promise.all(Array.from({ length: 8 }, () => create({ runbookId: 'adm-rate' })));
    const held = runs.filter((r) => r.status === 'throttled');
    expect(held).toHaveLength(2);
    const windowEnd = Math.ceil(Date.now() / 60_000) * 60_000;
    for (const r of held) {
      const event = (await events(r.runId)).find((e) => e.type === 'run.throttled');
      expect(event?.payload).toMatchObject({ limit: 'throttle', source: 'adm-rate' });
      expect(Date.parse(String(event?.payload.nextEligibleAt))).toBe(windowEnd);
    }
    expect(
      await allEnded(
        runs.map((r) => r.runId),
        100_000,
      ),
    ).toEqual(Array(8).fill('succeeded'));
    const admittedAt = await Promise.all(
      runs.map(async (r) =>
        Date.parse(String((await events(r.runId)).find((e) => e.type === 'run.admitted')?.timestamp)),
      ),
    );
    const perWindow = new Map<number, number>();
    for (const at of admittedAt)
      perWindow.set(Math.floor(at / 60_000), (perWindow.get(Math.floor(at / 60_000)) ?? 0) + 1);
    console.log(`throttle 6/min: admissions per clock minute ${JSON.stringify([...perWindow.values()])}`);
    expect([...perWindow.values()]).toEqual([6, 2]);
    for (const r of held) {
      const admitted = (await events(r.runId)).find((e) => e.type === 'run.admitted');
      expect(Date.parse(String(admitted?.timestamp))).toBeGreaterThanOrEqual(windowEnd);
    }
    await api('POST', '/limits/resume', { source: 'adm-rate', reason: 'done' });
  }, 150_000);

  it('runs a dependency chain in order, fails dependents of a failed run, and refuses an unknown id', async () => {
    await register('adm-dep', { action: 'sleep', params: { ms: 500 } });
    await register('adm-fails', { action: 'fail', params: { message: 'boom' } });
    const a = await create({ runbookId: 'adm-dep' });
    const b = await create({ runbookId: 'adm-dep', dependsOn: [a.runId] });
    const c = await create({ runbookId: 'adm-dep', dependsOn: [b.runId] });
    expect(b.status).toBe('queued');
    expect(await allEnded([a.runId, b.runId, c.runId], 60_000)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const startedAt = async (id: string) =>
      Date.parse(String((await events(id)).find((e) => e.type === 'run.started')?.timestamp));
    const endedAt = async (id: string) =>
      Date.parse(String((await events(id)).find((e) => e.type === 'run.succeeded')?.timestamp));
    expect(await startedAt(b.runId)).toBeGreaterThanOrEqual(await endedAt(a.runId));
    expect(await startedAt(c.runId)).toBeGreaterThanOrEqual(await endedAt(b.runId));

    const failing = await create({ runbookId: 'adm-fails' });
    const d = await create({ runbookId: 'adm-dep', dependsOn: [failing.runId] });
    const e = await create({ runbookId: 'adm-dep', dependsOn: [d.runId] });
    expect(await allEnded([failing.runId, d.runId, e.runId], 60_000)).toEqual(['failed', 'failed', 'failed']);
    for (const id of [d.runId, e.runId])
      expect((await api('GET', `/runs/${id}`)).body.error).toEqual(
        expect.objectContaining({ code: 'DEPENDENCY_FAILED' }),
      );
    const unknown = await api('POST', '/runs', {
      runbookId: 'adm-dep',
      dependsOn: ['run-00000000-0000-0000-0000-000000000000'],
    });
    expect(unknown.status).toBe(400);
  }, 120_000);
});

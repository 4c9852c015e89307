import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack } from '../../local/stack.js';
import { type RunEvent, verifyChain } from '../../shared/domain/events.js';
import { callApi, until } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

let stack: LocalStack | undefined;
let home: string | undefined;
const log: string[] = [];

/** Five agent nodes of group web: web-3 is slow, web-1 and web-2 are broken. */
const NODES = ['web-1', 'web-2', 'web-3', 'web-4', 'web-5'];
const attributesOf = (id: string) => ({
  ms: id === 'web-3' ? '10000' : '300',
  broken: id === 'web-1' || id === 'web-2' ? 'true' : 'false',
});

beforeAll(async () => {
  ({ stack, home } = await startTestStack('fanout', {
    workers: { 'dev-flex': 1, 'prod-standard': 0, 'prod-critical': 0, 'staging-standard': 0 },
    agents: NODES.map((nodeId) => ({ nodeId, groups: ['web'], profile: 'dev-flex', attributes: attributesOf(nodeId) })),
    reconcileIntervalMs: 3_600_000,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '2', POWERTOOLS_LOG_LEVEL: 'INFO' },
    log: (line) => log.push(line),
  }));
  await until(
    'five agent nodes online',
    async () => {
      const listed = (await api('GET', '/inventory?group=web')).body.nodes as Array<{ status: string }>;
      return listed.length === 5 && listed.every((n) => n.status === 'online') ? true : undefined;
    },
    60_000,
  );
}, 120_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  if (!stack) throw new Error('the stack did not start');
  return callApi(stack.restUrl, stack.issuer.tokens.operator ?? '', method, path, body, headers);
};

async function register(name: string, doc: Record<string, unknown>) {
  const registered = await api('POST', '/runbooks', { name, environment: 'dev', sandbox_profile: 'dev-flex', ...doc });
  expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
}

async function run(name: string, doc: Record<string, unknown>) {
  await register(name, doc);
  const created = await api('POST', '/runs', { runbookId: name }, { 'idempotency-key': crypto.randomUUID() });
  expect(created.status).toBe(202);
  const runId = String(created.body.runId);
  const detail = await until(
    `run ${runId} to end`,
    async () => {
      const { body } = await api('GET', `/runs/${runId}`);
      return ['succeeded', 'failed', 'cancelled'].includes(String(body.status)) ? body : undefined;
    },
    120_000,
    () => log.slice(-30).join('\n'),
  );
  const events: RunEvent[] = [];
  for (;;) {
    const { body } = await api('GET', `/runs/${runId}/events?since=${events.at(-1)?.seq ?? 0}&limit=1000`);
    const page = body.events as RunEvent[];
    if (page.length === 0) break;
    events.push(...page);
  }
  expect(verifyChain(events).valid).toBe(true);
  return { runId, detail, events };
}

const at = (e: RunEvent) => Date.parse(e.timestamp);
const of = (events: RunEvent[], type: string, stepId: string) =>
  events.filter((e) => e.type === type && e.stepId === stepId);
const sleep = (id: string, more: Record<string, unknown> = {}) => ({
  id,
  backend: 'test',
  action: 'sleep',
  params: { ms: '{{ target.attributes.ms }}' },
  target: { group: 'web' },
  ...more,
});
const echo = (id: string, more: Record<string, unknown> = {}) => ({
  id,
  backend: 'test',
  action: 'echo',
  params: { message: `${id} on {{ target.id }}` },
  target: { group: 'web' },
  ...more,
});
const failIfBroken = (id: string, more: Record<string, unknown> = {}) => ({
  id,
  backend: 'test',
  action: 'fail',
  params: { message: 'broken node', retryable: false, when: '{{ target.attributes.broken }}' },
  target: { group: 'web' },
  ...more,
});

/** The most intervals (start to end, per target) open at once. */
function peakInFlight(events: RunEvent[], stepId: string): number {
  const edges = [
    ...of(events, 'step.started', stepId).map((e) => ({ t: at(e), d: 1 })),
    ...[...of(events, 'step.succeeded', stepId), ...of(events, 'step.failed', stepId)].map((e) => ({
      t: at(e),
      d: -1,
    })),
  ].sort((a, b) => a.t - b.t || a.d - b.d);
  let open = 0;
  let peak = 0;
  for (const edge of edges) peak = Math.max(peak, (open += edge.d));
  return peak;
}

describe('fan-out over five agent nodes', () => {
  it('runs a barrier step on every node, two at a time, each on its own node, before the next step starts', async () => {
    const { detail, events } = await run('barrier', {
      steps: [sleep('warm', { max_concurrency: 2 }), echo('check')],
    });
    expect(detail.status).toBe('succeeded');
    const warmEnds = of(events, 'step.succeeded', 'warm').map(at);
    const checkStarts = of(events, 'step.started', 'check').map(at);
    expect(warmEnds).toHaveLength(5);
    expect(checkStarts).toHaveLength(5);
    expect(Math.max(...warmEnds)).toBeLessThanOrEqual(Math.min(...checkStarts));
    expect(peakInFlight(events, 'warm')).toBe(2);
    // A command for node A is executed by node A's worker only.
    for (const e of events.filter((x) => x.type === 'step.started')) {
      const lines = log.filter((l) => l.includes(`.${e.stepId}.1.${e.targetId}`) && /^\[agent:/.test(l));
      expect(lines.length).toBeGreaterThan(0);
      expect(new Set(lines.map((l) => /^\[agent:([^\]]+)\]/.exec(l)?.[1]))).toEqual(new Set([e.targetId]));
    }
    const warm = (detail.steps as Array<Record<string, unknown>>).find((s) => s.id === 'warm');
    expect(warm?.expected).toEqual(NODES);
    expect(warm?.counts).toEqual({ succeeded: 5 });
  }, 150_000);

  it('lets a fast node finish a pipeline phase while a slow node is still on its first step', async () => {
    const { detail, events } = await run('pipeline', {
      phases: [{ id: 'roll', mode: 'pipeline', steps: [sleep('drain'), echo('restart'), echo('verify')] }],
    });
    expect(detail.status).toBe('succeeded');
    const verified = of(events, 'step.succeeded', 'verify').find((e) => e.targetId === 'web-1');
    const slowDrained = of(events, 'step.succeeded', 'drain').find((e) => e.targetId === 'web-3');
    expect(verified && slowDrained && at(verified) < at(slowDrained)).toBe(true);
    expect(events.filter((e) => e.type === 'step.dispatched')).toHaveLength(1);
  }, 150_000);

  it('stops new targets once more than max_errors failed and fails the step', async () => {
    const { detail, events } = await run('budget', {
      steps: [failIfBroken('probe', { max_concurrency: 1, max_errors: 1 })],
    });
    expect(detail.status).toBe('failed');
    expect(of(events, 'step.started', 'probe').map((e) => e.targetId)).toEqual(['web-1', 'web-2']);
    expect(of(events, 'step.halted', 'probe')[0]?.payload).toMatchObject({ skipped: 3, failed: 2 });
    expect(JSON.stringify(detail.error)).toMatch(/2 of 5 target\(s\) failed, 3 not started/);
    const probe = (detail.steps as Array<Record<string, unknown>>).find((s) => s.id === 'probe');
    expect(probe?.counts).toEqual({ failed: 2, skipped: 3 });
  }, 150_000);

  it('applies conditions per target inside a pipeline phase', async () => {
    const { events } = await run('conditions', {
      strategy: 'continue',
      phases: [
        {
          id: 'fix',
          mode: 'pipeline',
          steps: [
            failIfBroken('check'),
            echo('recover', { condition: 'on_failure' }),
            echo('report', { condition: 'always' }),
          ],
        },
      ],
    });
    const targetsOf = (stepId: string) =>
      of(events, 'step.succeeded', stepId)
        .map((e) => e.targetId)
        .sort();
    expect(targetsOf('recover')).toEqual(['web-1', 'web-2']);
    expect(targetsOf('report')).toEqual(NODES);
  }, 150_000);

  it('fails a step whose group has no node, naming the group', async () => {
    const { detail } = await run('missing', { steps: [echo('nowhere', { target: { group: 'missing' } })] });
    expect(detail.status).toBe('failed');
    expect(JSON.stringify(detail.error)).toContain('group missing resolved to no node');
  }, 60_000);

  it('answers a dry run with the resolved nodes, the waves and the gates, and creates no run', async () => {
    await register('dry', {
      steps: [sleep('warm', { max_concurrency: 2, blast_radius: 'high' }), echo('check')],
    });
    const before = (await api('GET', '/runs?limit=100')).body.runs as unknown[];
    const planned = await api('POST', '/runs', { runbookId: 'dry', dryRun: true });
    expect(planned.status).toBe(200);
    const [warm, check] = planned.body.steps as Array<Record<string, unknown>>;
    expect(warm).toMatchObject({ targets: NODES, waves: [2, 2, 1], maxConcurrency: 2 });
    expect(warm?.gate).toMatchObject({ requiredApprovals: 2, blastRadius: 'high' });
    expect(warm?.policy).toMatchObject({ outcome: 'needs_approval' });
    // A high blast radius step makes every step of the run gated (validation mode per_step), with one approver.
    expect(check).toMatchObject({ targets: NODES, waves: [5], gate: { requiredApprovals: 1 } });
    expect((await api('GET', '/runs?limit=100')).body.runs).toHaveLength(before.length);
  }, 60_000);
});

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_NODE_IDS, type DemoNodeCall } from '../../local/demo-nodes.js';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { type RunEvent, verifyChain } from '../../shared/domain/events.js';
import { freePortBlock } from '../support/local-dynamodb.js';
import { callApi, until } from '../support/stack-api.js';

const ROOT = join(import.meta.dirname, '..', '..');
const EXAMPLES = join(ROOT, 'examples', 'runbooks');
/** The port the examples and the example secrets name: `npm start`'s demo service (gateway 4000 + 8). */
const README_DEMO = 'http://127.0.0.1:4008';

let stack: LocalStack;
let home: string;
const log: string[] = [];

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-examples-'));
  const port = await freePortBlock();
  // The example secrets, pointed at this stack's demo service instead of npm start's.
  const secrets = readFileSync(join(ROOT, 'local', 'secrets.example.json'), 'utf8');
  writeFileSync(join(home, 'secrets.json'), secrets.replaceAll(README_DEMO, `http://127.0.0.1:${port + 8}`));
  stack = await startLocalStack({
    port,
    stateDir: home,
    fresh: true,
    workers: { 'dev-flex': 1, 'staging-standard': 1, 'prod-standard': 1, 'prod-critical': 1 },
    reconcileIntervalMs: 3_600_000,
    demoNodes: true,
    log: (line) => log.push(line),
  });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(home, { recursive: true, force: true });
});

type Role = 'operator' | 'approver' | 'approver2';
const api = (as: Role, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  callApi(stack.restUrl, stack.issuer.tokens[as] ?? '', method, path, body, headers);
/** An input as the README gives it, for this stack's demo service. */
const local = (value: string) => value.replace(README_DEMO, stack.demo.url);

/** One example as the README's "Examples" section runs it. */
interface ExampleRun {
  readonly file: string;
  readonly runbookId: string;
  readonly inputs: Record<string, string>;
  /** The approvals, in order, and who approves each. */
  readonly approvals: ReadonlyArray<{ readonly approvalId: string; readonly by: readonly Role[] }>;
  readonly end: 'succeeded' | 'failed';
}

async function runExample(example: ExampleRun) {
  const body = readFileSync(join(EXAMPLES, example.file), 'utf8');
  const registered = example.file.endsWith('.json')
    ? await api('operator', 'POST', '/runbooks', JSON.parse(body))
    : await api('operator', 'POST', '/runbooks', body);
  expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
  const inputs = Object.fromEntries(Object.entries(example.inputs).map(([k, v]) => [k, local(v)]));
  const created = await api(
    'operator',
    'POST',
    '/runs',
    { runbookId: example.runbookId, inputs },
    { 'idempotency-key': crypto.randomUUID() },
  );
  expect(created.status, JSON.stringify(created.body)).toBe(202);
  const runId = String(created.body.runId);
  const context = () => log.slice(-30).join('\n');
  let seen = '';
  for (const { approvalId, by } of example.approvals) {
    await until(
      `approval ${approvalId} of ${example.runbookId}`,
      async () => {
        const { body: run } = await api('operator', 'GET', `/runs/${runId}`);
        const approvals = (run.approvals ?? []) as Array<{ approvalId: string; status: string }>;
        seen = JSON.stringify(approvals);
        return approvals.some((a) => a.approvalId === approvalId && a.status === 'requested') ? true : undefined;
      },
      60_000,
      () => `${seen}\n${context()}`,
    );
    for (const who of by) {
      const decided = await api(who, 'POST', `/runs/${runId}/approvals/${approvalId}`, { decision: 'approve' });
      expect(decided.status, JSON.stringify(decided.body)).toBeLessThan(300);
    }
  }
  const run = await until(
    `${example.runbookId} to end`,
    async () => {
      const { body: detail } = await api('operator', 'GET', `/runs/${runId}`);
      const approvals = (detail.approvals ?? []) as Array<{ approvalId: string; status: string }>;
      seen = `${String(detail.status)} ${approvals.map((a) => `${a.approvalId}=${a.status}`).join(' ')}`;
      return ['succeeded', 'failed', 'cancelled'].includes(String(detail.status)) ? detail : undefined;
    },
    90_000,
    () => `${seen}\n${context()}`,
  );
  const { body: page } = await api('operator', 'GET', `/runs/${runId}/events?limit=1000`);
  const events = page.events as RunEvent[];
  expect(verifyChain(events)).toMatchObject({ valid: true });
  expect(run.status, JSON.stringify(events.filter((e) => e.type === 'step.failed' || e.type === 'run.failed'))).toBe(
    example.end,
  );
  return { run, events };
}

const started = (events: RunEvent[], kind: 'step' | 'rollback' = 'step') =>
  events.filter((e) => e.type === 'step.started' && e.payload.kind === kind).map((e) => e.stepId);

const of = (events: RunEvent[], type: string, stepId: string) =>
  events.filter((e) => e.type === type && e.stepId === stepId);

/** From the demo pool's journal: the most nodes out of the pool at once, and those still out at the end. */
function outOfPool(calls: readonly DemoNodeCall[]): { most: number; left: string[] } {
  const out = new Set<string>();
  let most = 0;
  for (const call of calls) {
    if (call.status !== 200) continue;
    if (call.action === 'drain') out.add(call.node);
    if (call.action === 'enable') out.delete(call.node);
    most = Math.max(most, out.size);
  }
  return { most, left: [...out] };
}

describe('the examples in examples/runbooks, run as the README says', () => {
  it('runs hello to success', async () => {
    const { events } = await runExample({
      file: 'hello.yaml',
      runbookId: 'hello',
      inputs: {},
      approvals: [],
      end: 'succeeded',
    });
    expect(started(events)).toEqual(['greet', 'pause', 'count']);
  }, 120_000);

  it('runs restart-web to success after two approvers agree', async () => {
    const { events } = await runExample({
      file: 'restart-web.yaml',
      runbookId: 'restart-web',
      inputs: { service: 'nginx', health_url: `${README_DEMO}/health` },
      approvals: [{ approvalId: 'step.restart.1', by: ['approver', 'approver2'] }],
      end: 'succeeded',
    });
    expect(started(events)).toEqual(['restart', 'verify']);
  }, 120_000);

  it('starts the service again when restart-web fails to restart it, then ends failed', async () => {
    const { events } = await runExample({
      file: 'restart-web.yaml',
      runbookId: 'restart-web',
      inputs: { service: 'nginx-broken', health_url: `${README_DEMO}/health` },
      approvals: [{ approvalId: 'step.restart.1', by: ['approver', 'approver2'] }],
      end: 'failed',
    });
    // A failed exit is not retried; its own rollback runs, and verify (on_success) never does.
    expect(started(events)).toEqual(['restart']);
    expect(started(events, 'rollback')).toEqual(['restart']);
    const output = events.filter((e) => e.type === 'step.output').map((e) => e.payload.text);
    expect(output).toContain('nginx-broken: started');
    expect(events.find((e) => e.type === 'rollback.completed')?.payload).toEqual({ steps: ['restart'] });
  }, 120_000);

  it('runs rolling-restart over the demo pool two nodes at a time, verifying each node after its restart', async () => {
    const from = stack.demo.nodes.journal().length;
    const { run, events } = await runExample({
      file: 'rolling-restart.yaml',
      runbookId: 'rolling-restart',
      inputs: { service: 'nginx' },
      approvals: [
        { approvalId: 'step.drain.1', by: ['approver', 'approver2'] },
        { approvalId: 'phase.confirm.1', by: ['approver'] },
      ],
      end: 'succeeded',
    });
    const calls = stack.demo.nodes.journal().slice(from);
    expect(calls.every((c) => c.status === 200)).toBe(true);
    for (const node of DEMO_NODE_IDS) {
      const own = calls.filter((c) => c.node === node);
      expect(own.map((c) => c.action)).toEqual(['drain', 'restart', 'health', 'enable']);
      const restarted = own.find((c) => c.action === 'restart')?.at ?? Infinity;
      expect(own.find((c) => c.action === 'health')?.at).toBeGreaterThanOrEqual(restarted);
    }
    expect(outOfPool(calls)).toEqual({ most: 2, left: [] });
    const drain = (run.steps as Array<Record<string, unknown>>).find((s) => s.id === 'drain');
    expect(drain?.expected).toEqual([...DEMO_NODE_IDS]);
    expect(started(events).filter((id) => id === 'announce')).toHaveLength(1);
  }, 180_000);

  it('rolling-restart puts a node whose restart fails back into the pool, drains no node after it, and announces the end', async () => {
    const from = stack.demo.nodes.journal().length;
    stack.demo.nodes.failNextRestart('demo-web-2');
    const { events } = await runExample({
      file: 'rolling-restart.yaml',
      runbookId: 'rolling-restart',
      inputs: { service: 'nginx' },
      approvals: [
        { approvalId: 'step.drain.1', by: ['approver', 'approver2'] },
        { approvalId: 'phase.confirm.1', by: ['approver'] },
      ],
      end: 'failed',
    });
    const calls = stack.demo.nodes.journal().slice(from);
    const failed = calls.filter((c) => c.status !== 200);
    expect(failed.map((c) => [c.node, c.action, c.status])).toEqual([['demo-web-2', 'restart', 500]]);
    // Once the failure is known, no node is drained any more (max_errors 0).
    const failedAt = failed[0]?.at ?? 0;
    expect(calls.filter((c) => c.action === 'drain' && c.at > failedAt)).toEqual([]);
    expect(calls.some((c) => c.node === 'demo-web-2' && c.action === 'health')).toBe(false);
    expect(outOfPool(calls)).toMatchObject({ left: [] });
    expect(of(events, 'step.succeeded', 'put-back').map((e) => e.targetId)).toEqual(['demo-web-2']);
    expect(started(events).filter((id) => id === 'announce')).toHaveLength(1);
  }, 180_000);

  it('rotates the database credentials after two approvers agree', async () => {
    const secretId = 'capstan/prod-critical/orders-db';
    const before = JSON.parse(readFileSync(join(home, 'secrets.json'), 'utf8')) as Record<string, unknown>;
    await runExample({
      file: 'rotate-db-credentials.yaml',
      runbookId: 'rotate-db-credentials',
      inputs: { health_url: `${README_DEMO}/health` },
      approvals: [
        { approvalId: 'step.announce.1', by: ['approver'] },
        { approvalId: 'step.rotate.1', by: ['approver', 'approver2'] },
        { approvalId: 'step.verify.1', by: ['approver'] },
      ],
      end: 'succeeded',
    });
    const after = JSON.parse(readFileSync(join(home, 'secrets.json'), 'utf8')) as Record<string, unknown>;
    expect(after[secretId]).not.toEqual(before[secretId]);
    expect(stack.demo.messages('ops')).toEqual(['Rotating capstan/prod-critical/orders-db: approvals needed']);
  }, 180_000);

  it('enriches a ticket from the demo service', async () => {
    const { events } = await runExample({
      file: 'ticket-enrichment.json',
      runbookId: 'ticket-enrichment',
      inputs: { ticket_id: 'INC-1234', service_url: README_DEMO },
      approvals: [],
      end: 'succeeded',
    });
    expect(started(events)).toEqual(['health', 'ticket', 'summarise']);
  }, 120_000);
});

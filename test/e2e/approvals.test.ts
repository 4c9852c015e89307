import { readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import type { RunEvent } from '../../shared/domain/events.js';
import { freePort, freePortBlock } from '../support/local-dynamodb.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';

/**
 * Approvals on the local stack: a prod workflow behind the two-person rule, rejection and an
 * operator's rollback, two approvers completing a quorum at once, an SLA breach with its
 * escalation (a two-second SLA outside prod, set by this deployment's policy), and the live stream.
 */
let stack: LocalStack;
let home: string;
let webhook: Server;
const posted: string[] = [];
const log: string[] = [];
const SLA_SECONDS = 2;
/** The stack's log, for a test whose own `log` is the run's events. */
const stackLog = () => log;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'capstan-approvals-'));
  const webhookPort = await freePort();
  webhook = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      posted.push(body);
      response.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => webhook.listen(webhookPort, '127.0.0.1', resolve));
  stack = await startLocalStack({
    port: await freePortBlock(),
    stateDir: home,
    fresh: true,
    workers: { 'dev-flex': 1, 'prod-standard': 1 },
    // The reconciler's sweep is what escalates a gate past its SLA.
    reconcileIntervalMs: 1000,
    env: {
      CAPSTAN_WORKER_HEARTBEAT_SECONDS: '2',
      CAPSTAN_NOTIFY_WEBHOOK_URL: `http://127.0.0.1:${webhookPort}/hooks/approvals`,
      CAPSTAN_POLICY: JSON.stringify({ version: 1, sla: { otherSeconds: SLA_SECONDS } }),
    },
    log: (line) => log.push(line),
  });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  await new Promise((resolve) => webhook?.close(resolve));
  rmSync(home, { recursive: true, force: true });
});

const as = (who: string) => stack.issuer.tokens[who] ?? '';

const api = (method: string, path: string, who: string, body?: unknown) =>
  callApi(stack.restUrl, as(who), method, path, body);

async function register(doc: Record<string, unknown>) {
  const response = await api('POST', '/runbooks', 'operator', doc);
  expect(response.status, JSON.stringify(response.body)).toBeLessThan(300);
}

async function startRun(runbookId: string, who = 'operator') {
  const response = await api('POST', '/runs', who, { runbookId });
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return String(response.body.runId);
}

const until = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000) =>
  waitUntil(what, probe, timeoutMs, () => log.slice(-30).join('\n'));

const events = async (runId: string) =>
  (await api('GET', `/runs/${runId}/events?limit=1000`, 'operator')).body.events as RunEvent[];

/** The next `approval.requested` of a run after `seen` of them, as its approval id. */
const requested = (runId: string, seen = 0) =>
  until(`an approval request on ${runId}`, async () => {
    const found = (await events(runId)).filter((e) => e.type === 'approval.requested')[seen];
    return found ? String(found.payload.approvalId) : undefined;
  });

const status = (runId: string, wanted: readonly string[]) =>
  until(`run ${runId} to be ${wanted.join(' or ')}`, async () => {
    const { body } = await api('GET', `/runs/${runId}`, 'operator');
    return wanted.includes(String(body.status)) ? body : undefined;
  });

const decide = (runId: string, approvalId: string, who: string, decision: 'approve' | 'reject', notes?: string) =>
  api('POST', `/runs/${runId}/approvals/${approvalId}`, who, { decision, ...(notes && { notes }) });

describe('approvals', () => {
  it('holds a prod high-blast-radius step for two distinct approvers, never the requester', async () => {
    await register({
      name: 'prod-rotate',
      environment: 'prod',
      sandbox_profile: 'prod-standard',
      steps: [{ id: 'rotate', backend: 'test', action: 'echo', params: { message: 'rotated' }, blast_radius: 'high' }],
    });
    // An admin may approve in general, but not a run they requested.
    const runId = await startRun('prod-rotate', 'admin');
    const approvalId = await requested(runId);
    const waiting = await status(runId, ['waiting_for_approval']);
    expect(waiting.approvals).toEqual([
      expect.objectContaining({ approvalId, requiredApprovals: 2, status: 'requested', rule: 'two-key' }),
    ]);

    const byRequester = await decide(runId, approvalId, 'admin', 'approve');
    expect(byRequester.status).toBe(403);
    expect(JSON.stringify(byRequester.body)).toContain('requested this run');
    expect((await decide(runId, approvalId, 'operator', 'approve')).status).toBe(403);

    const first = await decide(runId, approvalId, 'approver', 'approve');
    expect(first).toMatchObject({ status: 200, body: { counted: true } });
    expect(first.body.resolved).toBeUndefined();
    // The run detail and the stack's log say what the run waits for, and how to decide it.
    const half = await status(runId, ['waiting_for_approval']);
    expect(half.waitingFor).toMatchObject({
      kind: 'approval',
      approvalId,
      stepId: 'rotate',
      requiredApprovals: 2,
      approvals: 1,
      decisions: [expect.objectContaining({ approver: 'adam.approver', decision: 'approve' })],
    });
    expect(stackLog().some((line) => line.includes(`run ${runId} waits for approval ${approvalId}`))).toBe(true);
    const again = await decide(runId, approvalId, 'approver', 'approve');
    expect(again).toMatchObject({ status: 200, body: { counted: false } });
    expect((await api('GET', `/runs/${runId}`, 'operator')).body.status).toBe('waiting_for_approval');

    const second = await decide(runId, approvalId, 'approver2', 'approve');
    expect(second).toMatchObject({ status: 200, body: { counted: true, resolved: 'approved' } });
    const done = await status(runId, ['succeeded', 'failed']);
    expect(done.status).toBe('succeeded');
    expect(done.approvals).toEqual([
      expect.objectContaining({
        status: 'approved',
        decisions: [
          expect.objectContaining({ approver: 'adam.approver', decision: 'approve' }),
          expect.objectContaining({ approver: 'beth.approver', decision: 'approve' }),
        ],
      }),
    ]);
    const log = await events(runId);
    expect(log.filter((e) => e.type === 'approval.decision_recorded')).toHaveLength(2);
    expect(log.filter((e) => e.type === 'approval.resolved')).toHaveLength(1);
    expect(log.find((e) => e.type === 'policy.decided')?.payload).toMatchObject({
      outcome: 'needs_approval',
      rule: 'two-key',
    });
    expect((await decide(runId, approvalId, 'admin', 'approve')).status).toBe(403);
    expect(
      (await api('POST', `/runs/${runId}/approvals/${approvalId}`, 'otherTenant', { decision: 'approve' })).status,
    ).toBe(404);
  });

  it('pauses a rejected run until an operator rolls it back', async () => {
    await register({
      name: 'dev-gated',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        {
          id: 'prepare',
          backend: 'test',
          action: 'echo',
          params: { message: 'prepared' },
          rollback: { backend: 'test', action: 'echo', params: { message: 'unprepared' } },
        },
        { id: 'switch', backend: 'test', action: 'echo', params: { message: 'switched' }, critical: true },
      ],
    });
    const runId = await startRun('dev-gated');
    const approvalId = await requested(runId);
    expect(approvalId).toBe('step.switch.1');
    const rejected = await decide(runId, approvalId, 'approver', 'reject', 'not during the freeze');
    expect(rejected.body).toMatchObject({ resolved: 'rejected' });
    const paused = await status(runId, ['paused']);
    expect(paused.error).toMatchObject({ code: 'APPROVAL_REJECTED' });
    expect(String(paused.pausedReason)).toContain('not during the freeze');
    expect(paused.waitingFor).toMatchObject({
      kind: 'operator',
      reason: expect.stringContaining('not during the freeze'),
      rejected: { approvalId, decisions: [expect.objectContaining({ decision: 'reject' })] },
      directives: ['retry', 'rollback', 'cancel'],
    });
    expect((await api('POST', `/runs/${runId}/resume`, 'viewer', { directive: 'rollback' })).status).toBe(401);
    expect((await api('POST', `/runs/${runId}/resume`, 'approver', { directive: 'rollback' })).status).toBe(403);
    expect((await api('POST', `/runs/${runId}/resume`, 'operator', { directive: 'sideways' })).status).toBe(400);

    const resumed = await api('POST', `/runs/${runId}/resume`, 'operator', { directive: 'rollback' });
    expect(resumed).toMatchObject({ status: 202, body: { directive: 'rollback' } });
    const done = await status(runId, ['succeeded', 'failed', 'cancelled']);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'ROLLED_BACK' } });
    const log = await events(runId);
    const types = log.map((e) => e.type);
    expect(types).toContain('run.paused');
    expect(types).toContain('run.resumed');
    expect(log.find((e) => e.type === 'rollback.completed')?.payload).toMatchObject({ steps: ['prepare'] });
    expect(log.filter((e) => e.type === 'step.dispatched' && e.stepId === 'switch')).toHaveLength(0);
    expect((await api('POST', `/runs/${runId}/resume`, 'operator', { directive: 'retry' })).status).toBe(409);
  });

  it('asks the gate again after a rejection and an operator retry', async () => {
    const runId = await startRun('dev-gated');
    const first = await requested(runId);
    await decide(runId, first, 'approver', 'reject');
    await status(runId, ['paused']);
    expect((await api('POST', `/runs/${runId}/resume`, 'operator', { directive: 'retry' })).status).toBe(202);
    const second = await requested(runId, 1);
    expect(second).toBe('step.switch.2');
    expect((await decide(runId, second, 'approver', 'approve')).body).toMatchObject({ resolved: 'approved' });
    expect((await status(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
  });

  it('ends a rejected run when the operator cancels it', async () => {
    const runId = await startRun('dev-gated');
    await decide(runId, await requested(runId), 'approver2', 'reject');
    await status(runId, ['paused']);
    const resumed = await api('POST', `/runs/${runId}/resume`, 'admin', { directive: 'cancel' });
    expect(resumed).toMatchObject({ status: 202, body: { directive: 'cancel' } });
    expect((await status(runId, ['cancelled', 'failed', 'succeeded'])).status).toBe('cancelled');
    const log = await events(runId);
    expect(log.find((e) => e.type === 'run.resumed')?.payload).toMatchObject({ directive: 'cancel', by: 'ada.admin' });
    expect(log.filter((e) => e.type === 'step.dispatched' && e.stepId === 'switch')).toHaveLength(0);
  });

  it('resumes the run once when two approvers complete the quorum at the same moment', async () => {
    await register({
      name: 'dev-two-key',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'big', backend: 'test', action: 'echo', params: { message: 'x' }, blast_radius: 'high' }],
    });
    const runId = await startRun('dev-two-key');
    const approvalId = await requested(runId);
    const both = await Promise.all([
      decide(runId, approvalId, 'approver', 'approve'),
      decide(runId, approvalId, 'approver2', 'approve'),
    ]);
    expect(both.map((r) => r.status)).toEqual([200, 200]);
    expect(both.filter((r) => r.body.resolved === 'approved')).toHaveLength(1);
    expect((await status(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    const log = await events(runId);
    expect(log.filter((e) => e.type === 'approval.decision_recorded')).toHaveLength(2);
    expect(log.filter((e) => e.type === 'approval.resolved')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'step.dispatched')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'step.succeeded')).toHaveLength(1);
  });

  it('escalates a gate past its SLA and keeps waiting; the request and the escalation reach the webhook', async () => {
    const runId = await startRun('dev-gated');
    const approvalId = await requested(runId);
    const expired = await until(
      'approval.expired',
      async () => (await events(runId)).find((e) => e.type === 'approval.expired'),
      SLA_SECONDS * 1000 + 20_000,
    );
    expect(expired.payload).toMatchObject({ approvalId, escalated: true });
    const run = await api('GET', `/runs/${runId}`, 'operator');
    expect(run.body.status).toBe('waiting_for_approval');
    expect(run.body.approvals).toEqual([expect.objectContaining({ approvalId, status: 'escalated' })]);

    const mine = posted.map((p) => String((JSON.parse(p) as { text: string }).text)).filter((t) => t.includes(runId));
    expect(mine).toHaveLength(2);
    expect(mine[0]).toContain('Approval needed');
    for (const text of mine) {
      expect(text).toContain('switch');
      expect(text).toContain('test.echo');
      expect(text).toContain('critical');
      expect(text).toContain(`/v1/runs/${runId}`);
    }
    expect(mine[1]).toContain('ESCALATION');
    const busLog = join(home, 'data', 'eventbridge.jsonl');
    const published = await until('the escalation on the bus', async () => {
      if (!existsSync(busLog)) return undefined;
      const lines = readFileSync(busLog, 'utf8').trim().split('\n');
      return lines
        .map((l) => JSON.parse(l) as { detailType: string; detail: { runId: string } })
        .find((e) => e.detailType === 'approval.escalated' && e.detail.runId === runId);
    });
    expect(published.detail).toMatchObject({ approvalId });

    // Approving after the SLA still counts: the gate waits until its hard limit.
    expect((await decide(runId, approvalId, 'approver', 'approve')).body).toMatchObject({ resolved: 'approved' });
    expect((await status(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
  });

  it('records an auto-approval by policy with its numbers', async () => {
    await register({
      name: 'dev-confident',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        {
          id: 'tidy',
          backend: 'test',
          action: 'echo',
          params: { message: 'x' },
          critical: true,
          confidence_score: 0.97,
        },
      ],
    });
    const runId = await startRun('dev-confident');
    const done = await status(runId, ['succeeded', 'failed', 'waiting_for_approval']);
    expect(done.status).toBe('succeeded');
    expect(done.approvals).toEqual([
      expect.objectContaining({
        status: 'approved',
        decisions: [expect.objectContaining({ approver: 'policy', byPolicy: true })],
      }),
    ]);
    const resolved = (await events(runId)).find((e) => e.type === 'approval.resolved');
    expect(resolved?.payload).toMatchObject({ byPolicy: true, confidence: 0.97, threshold: 0.9 });
  });

  it('streams approval.resolved to a WebSocket subscriber within 2 s of the deciding request', async () => {
    const runId = await startRun('dev-gated');
    const approvalId = await requested(runId);
    const socket = new WebSocket(`${stack.wsUrl}?token=${as('operator')}`);
    const seen: Array<{ event: RunEvent; at: number }> = [];
    socket.on('message', (data: Buffer) =>
      seen.push({ event: JSON.parse(data.toString()) as RunEvent, at: Date.now() }),
    );
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ action: 'subscribe', runId }));
    await until('the replay', async () => (seen.length > 0 ? true : undefined));

    const sent = Date.now();
    await decide(runId, approvalId, 'approver', 'approve');
    const resolved = await until('approval.resolved on the socket', async () =>
      seen.find((s) => s.event.type === 'approval.resolved'),
    );
    socket.close();
    expect(resolved.event.payload).toMatchObject({ approvalId, status: 'approved' });
    expect(resolved.at - sent).toBeLessThan(2000);
    await status(runId, ['succeeded']);
  });

  it('cancelling a run that waits on a gate ends it at once', async () => {
    const runId = await startRun('dev-gated');
    await requested(runId);
    expect((await api('POST', `/runs/${runId}/cancel`, 'operator')).status).toBe(202);
    const done = await status(runId, ['cancelled', 'failed', 'succeeded']);
    expect(done.status).toBe('cancelled');
    // The gate is withdrawn: nobody is escalated to about a run that ended.
    expect(done.approvals).toEqual([expect.objectContaining({ status: 'cancelled' })]);
  });
});

import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack } from '../../local/stack.js';
import { checkBundle } from '../../shared/domain/evidence/check.js';
import { readTar } from '../../shared/domain/evidence/tar.js';
import type { RunEvent } from '../../shared/domain/events.js';
import {
  eventsOf,
  linesOf,
  pack,
  rechain,
  replace,
  reseal,
  testKey,
  textOf,
  unpack,
} from '../support/evidence-bundles.js';
import { callApi, until as waitUntil } from '../support/stack-api.js';
import { startTestStack, stopTestStack } from '../support/test-stack.js';

/**
 * Evidence on the local stack: a run with an approval, a retry and a rollback gives a bundle
 * signed by the local KMS key that verifies offline, fails with the right reason when tampered
 * with, and replays sealed; artifacts, a tenant export of 20 runs, and a replay of a run.
 */
let stack: LocalStack;
let home: string;
const log: string[] = [];

beforeAll(async () => {
  ({ stack, home } = await startTestStack('evidence', {
    workers: { 'dev-flex': 2 },
    reconcileIntervalMs: 60_000,
    env: { CAPSTAN_WORKER_HEARTBEAT_SECONDS: '2' },
    log: (line) => log.push(line),
  }));
}, 90_000);

afterAll(async () => {
  await stopTestStack(stack, home);
});

const as = (who: string) => stack.issuer.tokens[who] ?? '';
const api = (method: string, path: string, who: string, body?: unknown) =>
  callApi(stack.restUrl, as(who), method, path, body);
const until = <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000) =>
  waitUntil(what, probe, timeoutMs, () => log.slice(-30).join('\n'));
const bytes = async (path: string, who = 'operator') => {
  const response = await fetch(`${stack.restUrl}${path}`, { headers: { authorization: `Bearer ${as(who)}` } });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    body: new Uint8Array(await response.arrayBuffer()),
  };
};
const events = async (runId: string) =>
  (await api('GET', `/runs/${runId}/events?limit=1000`, 'operator')).body.events as RunEvent[];
const finished = (runId: string) =>
  until(`run ${runId} to finish`, async () => {
    const { body } = await api('GET', `/runs/${runId}`, 'operator');
    return ['succeeded', 'failed', 'cancelled'].includes(String(body.status)) ? String(body.status) : undefined;
  });
const start = async (runbookId: string, inputs: Record<string, unknown> = {}) => {
  const response = await api('POST', '/runs', 'operator', { runbookId, inputs });
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  return String(response.body.runId);
};

describe('evidence', () => {
  let runId: string;
  let bundle: Uint8Array;

  it('seals a run with an approval, a retry and a rollback into a bundle that verifies and replays', async () => {
    const registered = await api('POST', '/runbooks', 'operator', {
      name: 'audited',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        { id: 'report', backend: 'test', action: 'artifact', params: { name: 'report.txt', content: 'all good\n' } },
        {
          id: 'change',
          backend: 'test',
          action: 'flaky',
          params: { fail_times: 1 },
          retries: 1,
          blast_radius: 'high',
          rollback: { backend: 'test', action: 'echo', params: { message: 'undone' } },
        },
        { id: 'break', backend: 'test', action: 'fail', params: { message: 'broken on purpose', retryable: false } },
      ],
    });
    expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
    runId = await start('audited');
    await until('the first approval request', async () =>
      (await events(runId)).some((e) => e.type === 'approval.requested') ? true : undefined,
    );
    expect((await api('GET', `/runs/${runId}/evidence`, 'operator')).status).toBe(409);
    // Every gate the run asks for is approved by two people (a high blast radius needs both).
    const decided = new Set<string>();
    await until('the run to pass its gates and finish', async () => {
      const list = await events(runId);
      if (list.some((e) => e.type === 'run.failed' || e.type === 'run.succeeded')) return true;
      for (const e of list.filter((x) => x.type === 'approval.requested')) {
        const approvalId = String(e.payload.approvalId);
        if (decided.has(approvalId)) continue;
        decided.add(approvalId);
        for (const who of ['approver', 'approver2'])
          await api('POST', `/runs/${runId}/approvals/${approvalId}`, who, { decision: 'approve' });
      }
      return undefined;
    });
    expect(decided.size).toBeGreaterThan(0);
    expect(await finished(runId)).toBe('failed');
    const types = (await events(runId)).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['approval.resolved', 'rollback.started', 'artifact.stored']));
    expect((await events(runId)).filter((e) => e.type === 'step.dispatched' && e.stepId === 'change')).toHaveLength(3);

    const first = await bytes(`/runs/${runId}/evidence`);
    expect(first).toMatchObject({ status: 200, type: 'application/gzip' });
    bundle = first.body;
    const verdict = checkBundle(bundle, { replay: true });
    expect(verdict, JSON.stringify(verdict)).toMatchObject({ ok: true, replayed: [{ runId }] });
    expect(Buffer.from((await bytes(`/runs/${runId}/evidence`)).body).equals(Buffer.from(bundle))).toBe(true);
    expect((await api('GET', `/runs/${runId}/evidence`, 'otherTenant')).status).toBe(404);

    const files = unpack(bundle);
    const manifest = JSON.parse(textOf(files, 'manifest.json')) as { keyId: string; chainHead: { seq: number } };
    expect(manifest.keyId).toMatch(/^arn:aws:kms:/);
    const artifacts = textOf(files, 'artifacts.jsonl');
    expect(artifacts).toContain('report.txt');
    const cost = JSON.parse(textOf(files, 'cost.json')) as {
      steps: Array<{ stepId: string; kind: string; attempts: number }>;
    };
    expect(cost.steps).toEqual(
      expect.arrayContaining([{ stepId: 'change', kind: 'step', attempts: 2, executions: 2 }]),
    );
    expect(JSON.stringify(files.map((f) => textOf(files, f.path)))).not.toMatch(
      /local-dev-secret|BEGIN (EC )?PRIVATE KEY/,
    );
  }, 120_000);

  it('fails with the right reason for a flipped byte, a removed event, another key and a re-hashed edit', () => {
    const files = unpack(bundle);
    const pinned = textOf(files, 'public-key.pem');
    for (const file of files.filter((f) => f.body.length > 0)) {
      const flipped = files.map((f) =>
        f.path === file.path ? { ...f, body: Buffer.from(f.body).map((b, i) => (i === 0 ? b ^ 1 : b)) } : f,
      );
      expect(checkBundle(pack(flipped)).ok, file.path).toBe(false);
    }
    const list = eventsOf(textOf(files, 'events.jsonl'));
    const removed = replace(files, 'events.jsonl', linesOf(list.filter((e) => e.seq !== 5)));
    expect(checkBundle(pack(removed))).toMatchObject({ ok: false, check: 'digest' });
    expect(checkBundle(pack(reseal(removed, testKey(), { swapKey: true })))).toMatchObject({
      ok: false,
      check: 'chain',
    });
    expect(checkBundle(pack(reseal(files, testKey())))).toMatchObject({ ok: false, check: 'signature' });
    expect(checkBundle(pack(reseal(files, testKey(), { swapKey: true })), { pinnedKeyPem: pinned })).toMatchObject({
      ok: false,
      check: 'signature',
    });
    const edited = rechain(list.map((e) => (e.seq === 4 ? { ...e, payload: { ...e.payload, forged: true } } : e)));
    const rehashed = replace(files, 'events.jsonl', linesOf(edited));
    expect(checkBundle(pack(rehashed))).toMatchObject({ ok: false, check: 'digest' });
    expect(checkBundle(pack(reseal(rehashed, testKey(), { swapKey: true })))).toMatchObject({
      ok: false,
      check: 'chain-head',
    });
  });

  it('lists and serves the artifact with its digest', async () => {
    const listed = await api('GET', `/runs/${runId}/artifacts`, 'approver');
    expect(listed.body.artifacts).toEqual([expect.objectContaining({ name: 'report.txt', stepId: 'report', size: 9 })]);
    const download = await bytes(`/runs/${runId}/artifacts/report.txt`);
    expect(Buffer.from(download.body).toString()).toBe('all good\n');
    expect((await bytes(`/runs/${runId}/artifacts/report.txt`, 'otherTenant')).status).toBe(404);
  });

  it('replays a finished run with replayOf, the same digest and the same order of dispatches', async () => {
    await api('POST', '/runbooks', 'operator', {
      name: 'replayable',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [
        { id: 'a', backend: 'test', action: 'echo', params: { message: 'a' } },
        { id: 'b', backend: 'test', action: 'echo', params: { message: 'b' } },
      ],
    });
    const original = await start('replayable');
    expect(await finished(original)).toBe('succeeded');
    const replay = await api('POST', `/runs/${original}/replay`, 'operator', { reason: 'audit-verification' });
    expect(replay).toMatchObject({ status: 202, body: { replayOf: original } });
    const copy = String(replay.body.runId);
    expect(await finished(copy)).toBe('succeeded');
    const [a, b] = await Promise.all([
      api('GET', `/runs/${original}`, 'operator'),
      api('GET', `/runs/${copy}`, 'operator'),
    ]);
    expect(b.body).toMatchObject({ replayOf: original, runbookDigest: a.body.runbookDigest, inputs: a.body.inputs });
    const order = async (id: string) =>
      (await events(id)).filter((e) => e.type === 'step.dispatched').map((e) => e.stepId);
    expect(await order(copy)).toEqual(await order(original));
    expect((await events(original)).filter((e) => e.type === 'run.replayed')).toEqual([
      expect.objectContaining({
        payload: expect.objectContaining({ replayRunId: copy, reason: 'audit-verification' }),
      }),
    ]);
  }, 90_000);

  it("exports 20 runs of the tenant into a bundle that verifies, with no other tenant's run", async () => {
    const since = new Date().toISOString();
    // A control change in the window: the export carries it, with its actor and reason.
    const quota = { runbook: '*', maxActive: 1000 };
    expect((await api('PUT', '/quotas/*', 'admin', quota)).status).toBe(200);
    const runs = [];
    for (let i = 0; i < 20; i++) runs.push(await start('replayable'));
    await Promise.all(runs.map((id) => finished(id)));
    // Another tenant's export of the same window holds none of them.
    expect(await api('POST', '/exports', 'otherTenant', { since })).toMatchObject({ status: 201, body: { runs: 0 } });
    const created = await api('POST', '/exports', 'operator', { since });
    expect(created).toMatchObject({ status: 201, body: { runs: 20 } });
    const exported = await bytes(`/exports/${String(created.body.exportId)}`);
    const verdict = checkBundle(exported.body, { replay: true });
    expect(verdict, JSON.stringify(verdict).slice(0, 500)).toMatchObject({ ok: true });
    expect(verdict.ok && verdict.runs.map((r) => r.runId).sort()).toEqual([...runs].sort());
    const controls = readTar(gunzipSync(exported.body)).find((e) => e.path === 'controls.jsonl');
    const entries = new TextDecoder()
      .decode(controls?.body)
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(entries).toEqual([expect.objectContaining({ actor: expect.any(String), at: expect.any(String) })]);
    expect((await bytes(`/exports/${String(created.body.exportId)}`, 'otherTenant')).status).toBe(404);
  }, 180_000);
});

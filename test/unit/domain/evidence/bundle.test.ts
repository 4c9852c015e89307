import { createPublicKey, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { makeGetEvidence } from '../../../../shared/app/evidence.js';
import type { BundleRecord, EvidenceDeps } from '../../../../shared/app/evidence-ports.js';
import type { Run, RunbookVersion, StepExecution } from '../../../../shared/domain/entities.js';
import { checkBundle } from '../../../../shared/domain/evidence/check.js';
import { MANIFEST_PAYLOAD_TYPE, preAuthEncoding } from '../../../../shared/domain/evidence/dsse.js';
import { readTar, writeTar } from '../../../../shared/domain/evidence/tar.js';
import { chainEvents, EMPTY_CHAIN, type EventDraft, type RunEvent } from '../../../../shared/domain/events.js';
import { DEFAULT_POLICY } from '../../../../shared/domain/policy.js';
import { signDigestP256 } from '../../../../local/ecdsa-p256.js';
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
} from '../../../support/evidence-bundles.js';

const RUN_ID = 'run-00000000-0000-4000-8000-000000000001';
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const principal = { subject: 'alice', tenantId: 't1', roles: ['operator' as const] };

const runbook: RunbookVersion = {
  tenantId: 't1',
  runbookId: 'demo',
  version: 1,
  digest: 'sha256:demo',
  createdAt: at(0),
  createdBy: 'alice',
  definition: {
    name: 'demo',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: [
      { id: 'first', backend: 'test', action: 'echo', params: { message: 'one' } },
      { id: 'second', backend: 'test', action: 'flaky', params: { fail_times: 1 }, retries: 1 },
    ],
  },
};

const draft = (
  type: EventDraft['type'],
  s: number,
  payload: EventDraft['payload'],
  extra: Partial<EventDraft> = {},
): EventDraft => ({
  eventId: `e-${type}-${s}`,
  type,
  timestamp: at(s),
  payload,
  meta: {},
  ...extra,
});

function stepEvents(stepId: string, attempt: number, s: number, ok: boolean): EventDraft[] {
  const about = { stepId, targetId: 'once' };
  return [
    draft(
      'step.dispatched',
      s,
      { kind: 'step', attempt, backend: 'test', action: 'echo', targets: ['once'] },
      { stepId },
    ),
    draft(
      'step.started',
      s + 1,
      { kind: 'step', attempt, backend: 'test', action: 'echo' },
      { ...about, meta: { sandboxProfile: 'dev-flex' } },
    ),
    ok
      ? draft('step.succeeded', s + 3, { kind: 'step', attempt, output: {}, fromReceipt: false }, about)
      : draft(
          'step.failed',
          s + 3,
          { kind: 'step', attempt, outcome: 'failed', error: { code: 'FLAKY', message: 'no', retryable: true } },
          about,
        ),
  ];
}

const drafts: EventDraft[] = [
  draft('run.created', 0, { runbookId: 'demo' }),
  draft('run.started', 1, {}),
  ...stepEvents('first', 1, 2, true),
  ...stepEvents('second', 1, 10, false),
  // The retry's back-off is at most 2 s after attempt 1 (full jitter), so 100 s later it is due.
  ...stepEvents('second', 2, 100, true),
  draft('run.succeeded', 200, {}),
];
const { events, head } = chainEvents(EMPTY_CHAIN, { runId: RUN_ID, tenantId: 't1' }, drafts);

const run: Run = {
  runId: RUN_ID,
  tenantId: 't1',
  runbookId: 'demo',
  runbookVersion: 1,
  runbookDigest: 'sha256:demo',
  status: 'succeeded',
  inputs: {},
  priority: 'normal',
  requestedBy: 'alice',
  createdAt: at(0),
  updatedAt: at(200),
  cancelRequested: false,
};

const execution = (stepId: string, attempt: number, status: StepExecution['status']): StepExecution => ({
  executionId: `${RUN_ID}.step.${stepId}.${attempt}.once`,
  runId: RUN_ID,
  tenantId: 't1',
  stepId,
  kind: 'step',
  targetId: 'once',
  attempt,
  status,
  idempotencyKey: `${RUN_ID}.step.${stepId}.once`,
  createdAt: at(1),
  startedAt: at(2),
  endedAt: at(4),
  outputTail: [],
  secretsUsed: ['capstan/dev-flex/api-token'],
});

function fakeDeps(key = testKey()): EvidenceDeps & { stored: Map<string, Uint8Array> } {
  const stored = new Map<string, Uint8Array>();
  const records = new Map<string, BundleRecord>();
  return {
    stored,
    runs: {
      load: async (id) => (id === RUN_ID ? { run, head } : undefined),
      events: async (_id, since, limit) => events.filter((e) => e.seq > since).slice(0, limit),
      executions: async () => [
        execution('first', 1, 'succeeded'),
        execution('second', 1, 'failed'),
        execution('second', 2, 'succeeded'),
      ],
      receipt: async (k) => ({
        key: k,
        executionId: 'x',
        outcome: 'succeeded',
        output: { ok: true },
        recordedAt: at(4),
      }),
      list: async () => ({ items: [run] }),
    },
    approvals: { list: async () => [] },
    runbooks: { get: async () => runbook },
    objects: {
      get: async (k) => stored.get(k),
      put: async (k, body) => void stored.set(k, body),
      putStream: async () => 0,
    },
    index: {
      find: async (id) => records.get(id),
      record: async (id, r) => (records.has(id) ? false : (records.set(id, r), true)),
    },
    signer: {
      publicKey: async () => ({ keyId: 'test-key', pem: key.pem }),
      signDigest: async (d) => signDigestP256(key.privateKey, d),
    },
    policy: DEFAULT_POLICY,
    clock: { now: () => new Date(at(300)) },
  };
}

describe('evidence bundles', () => {
  it('round-trips files through the ustar writer and reader', () => {
    const long = `${'d/'.repeat(60)}file.txt`;
    const entries = readTar(
      writeTar([
        { path: 'a.txt', body: Buffer.from('hello') },
        { path: long, body: Buffer.alloc(1025, 7) },
      ]),
    );
    expect(entries.map((e) => [e.path, e.body.length])).toEqual([
      ['a.txt', 5],
      [long, 1025],
    ]);
  });

  it('builds a bundle that verifies and replays, and serves the stored one the second time', async () => {
    const deps = fakeDeps();
    const getEvidence = makeGetEvidence(deps);
    const first = await getEvidence(principal, RUN_ID);
    const verdict = checkBundle(first.body, { replay: true });
    expect(verdict).toMatchObject({ ok: true, runs: [{ runId: RUN_ID, events: events.length, head: head.hash }] });
    expect(verdict.ok && verdict.replayed).toEqual([{ runId: RUN_ID, decisions: 4 }]);
    const again = await getEvidence(principal, RUN_ID);
    expect(again.sha256).toBe(first.sha256);
    expect(deps.stored.size).toBe(1);

    const files = unpack(first.body);
    expect(files.map((f) => f.path)).toEqual(
      expect.arrayContaining([
        'manifest.json',
        'run.json',
        'runbook.json',
        'events.jsonl',
        'approvals.jsonl',
        'policy.jsonl',
        'receipts.jsonl',
        'public-key.pem',
        'signatures/manifest.dsse.json',
        'cost.json',
      ]),
    );
    const cost = JSON.parse(textOf(files, 'cost.json')) as {
      steps: unknown[];
      workerSeconds: { byBackend: Record<string, number> };
    };
    expect(cost.steps).toEqual([
      { stepId: 'first', kind: 'step', attempts: 1, executions: 1 },
      { stepId: 'second', kind: 'step', attempts: 2, executions: 2 },
    ]);
    expect(cost.workerSeconds.byBackend).toEqual({ test: 6 });
    const receipts = textOf(files, 'receipts.jsonl').trim().split('\n');
    expect(receipts).toHaveLength(3);
    expect(JSON.parse(receipts[0] ?? '{}')).toMatchObject({
      request: { backend: 'test', action: 'echo' },
      reversible: false,
    });
  });

  it('answers 404 for another tenant and 409 while the run is not finished', async () => {
    const deps = fakeDeps();
    await expect(makeGetEvidence(deps)({ ...principal, tenantId: 'other' }, RUN_ID)).rejects.toThrow(/not found/);
    const running = {
      ...deps,
      runs: { ...deps.runs, load: async () => ({ run: { ...run, status: 'running' as const }, head }) },
    };
    await expect(makeGetEvidence(running)(principal, RUN_ID)).rejects.toThrow(/running/);
  });

  it("verifies the DSSE signature over the PAE with Node's crypto and public-key.pem", async () => {
    const { body } = await makeGetEvidence(fakeDeps())(principal, RUN_ID);
    const files = unpack(body);
    const envelope = JSON.parse(textOf(files, 'signatures/manifest.dsse.json')) as {
      payload: string;
      signatures: Array<{ sig: string }>;
    };
    const pae = preAuthEncoding(MANIFEST_PAYLOAD_TYPE, Buffer.from(textOf(files, 'manifest.json')));
    const key = createPublicKey(textOf(files, 'public-key.pem'));
    expect(verify('sha256', pae, key, Buffer.from(envelope.signatures[0]?.sig ?? '', 'base64'))).toBe(true);
  });

  describe('tampering', () => {
    const bundle = async () => unpack((await makeGetEvidence(fakeDeps())(principal, RUN_ID)).body);

    it('names the file whose byte was flipped', async () => {
      const files = await bundle();
      // An empty file (no approvals) has no byte to flip.
      for (const target of files.filter((f) => f.body.length > 0).map((f) => f.path)) {
        const flip = (body: Uint8Array) =>
          Buffer.from(body).map((b, i) => (i === Math.min(10, body.length - 1) ? b ^ 1 : b));
        const flipped = files.map((f) => (f.path === target ? { path: f.path, body: flip(f.body) } : f));
        const verdict = checkBundle(pack(flipped));
        expect(verdict.ok, target).toBe(false);
        const expected = ['manifest.json', 'signatures/manifest.dsse.json', 'public-key.pem'].includes(target)
          ? 'signature'
          : 'digest';
        expect(verdict.ok ? '' : verdict.check, target).toBe(expected);
        if (expected === 'digest') expect(verdict.ok ? '' : verdict.reason).toContain(target);
      }
    });

    it('fails on a removed event: the digest, or the chain once the digests are forged', async () => {
      const files = await bundle();
      const removed = replace(
        files,
        'events.jsonl',
        linesOf(eventsOf(textOf(files, 'events.jsonl')).filter((e) => e.seq !== 4)),
      );
      expect(checkBundle(pack(removed))).toMatchObject({
        ok: false,
        check: 'digest',
        reason: expect.stringContaining('events.jsonl'),
      });
      const forged = reseal(removed, testKey(), { swapKey: true });
      expect(checkBundle(pack(forged))).toMatchObject({
        ok: false,
        check: 'chain',
        reason: expect.stringContaining('expected seq 4, found 5'),
      });
    });

    it('fails when re-signed with another key, with the bundle key or a pinned one', async () => {
      const files = await bundle();
      const original = textOf(files, 'public-key.pem');
      const other = testKey();
      expect(checkBundle(pack(reseal(files, other)))).toMatchObject({ ok: false, check: 'signature' });
      const swapped = pack(reseal(files, other, { swapKey: true }));
      expect(checkBundle(swapped).ok).toBe(true);
      expect(checkBundle(swapped, { pinnedKeyPem: original })).toMatchObject({
        ok: false,
        check: 'signature',
        reason: expect.stringContaining('pinned'),
      });
    });

    it('fails on an edited, re-hashed event whose chain head no longer matches the manifest', async () => {
      const files = await bundle();
      const edited = eventsOf(textOf(files, 'events.jsonl')).map((e) =>
        e.seq === 3 ? { ...e, payload: { ...e.payload, attempt: 9 } } : e,
      );
      const rechained = replace(files, 'events.jsonl', linesOf(rechain(edited)));
      expect(checkBundle(pack(rechained))).toMatchObject({ ok: false, check: 'digest' });
      const forged = reseal(rechained, testKey(), { swapKey: true });
      expect(checkBundle(pack(forged))).toMatchObject({ ok: false, check: 'chain-head' });
      expect(checkBundle(pack(forged), { pinnedKeyPem: textOf(files, 'public-key.pem') })).toMatchObject({
        ok: false,
        check: 'signature',
      });
    });

    it('names the divergence of reordered, re-chained events in a sealed replay', async () => {
      const files = await bundle();
      const list = eventsOf(textOf(files, 'events.jsonl'));
      // The second step dispatched before the first: the chain holds, the planner disagrees.
      const reordered = [...list.slice(0, 2), ...list.slice(5, 8), ...list.slice(2, 5), ...list.slice(8)];
      const forged = reseal(replace(files, 'events.jsonl', linesOf(rechain(reordered as RunEvent[]))), testKey(), {
        swapKey: true,
        edit: (m) => {
          const last = rechain(reordered).at(-1);
          m.chainHead = { seq: last?.seq, hash: last?.hash };
        },
      });
      expect(checkBundle(pack(forged)).ok).toBe(true);
      expect(checkBundle(pack(forged), { replay: true })).toMatchObject({
        ok: false,
        check: 'replay',
        reason: expect.stringMatching(
          /decision 1 \(seq 3, step.dispatched\) diverges: the log records dispatch second .*the planner decides dispatch first/,
        ),
      });
    });
  });
});

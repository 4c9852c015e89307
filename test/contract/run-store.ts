import { describe, expect, it } from 'vitest';
import type { ApprovalStore } from '../../shared/app/ports/approvals.js';
import type { RunStore } from '../../shared/app/ports/runs.js';
import { writes } from '../../shared/app/ports/writes.js';
import type { Run, StepExecution } from '../../shared/domain/entities.js';
import { StaleWriteError } from '../../shared/domain/errors.js';
import { type EventDraft, verifyChain } from '../../shared/domain/events.js';
import { laneEvents, type StagedEvent } from '../../shared/domain/inbox.js';
import { aRun } from '../support/runs.js';

export interface Stores {
  readonly runs: RunStore;
  readonly approvals: ApprovalStore;
}

let counter = 0;
const NOW = '2026-01-01T00:00:00.000Z';

function newRun(): Run {
  counter++;
  return aRun({
    runId: `run-contract-${Date.now()}-${counter}`,
    tenantId: 'tenant-contract',
    requestedBy: 'alice',
    createdAt: NOW,
    updatedAt: NOW,
  });
}

const event = (type: EventDraft['type'], payload: EventDraft['payload'] = {}): EventDraft => ({
  eventId: `e-${Math.random().toString(36).slice(2)}`,
  type,
  timestamp: NOW,
  payload,
  meta: {},
});

function pending(run: Run): StepExecution {
  return {
    executionId: `${run.runId}.step.one.1.once`,
    runId: run.runId,
    tenantId: run.tenantId,
    stepId: 'one',
    kind: 'step',
    targetId: 'once',
    attempt: 1,
    status: 'pending',
    idempotencyKey: `${run.runId}.step.one.once`,
    createdAt: NOW,
    outputTail: [],
    secretsUsed: [],
  };
}

const aggregate = {
  kind: 'step',
  stepId: 'one',
  attempt: 1,
  total: 1,
  done: 0,
  succeeded: 0,
  failed: 0,
  completed: false,
  taskToken: 't1',
} as const;

/** Runs a created run with one pending execution and its aggregate. */
async function dispatched(runs: RunStore): Promise<{ run: Run; execution: StepExecution }> {
  const run = newRun();
  await runs.create(run, [event('run.created')], undefined);
  const execution = pending(run);
  await runs.mutate(run.runId, () => ({
    events: [event('step.dispatched')],
    writes: [writes.putExecution(execution), writes.putAggregate(run.runId, aggregate)],
  }));
  return { run, execution };
}

/**
 * What every implementation of the run ports must do, run against the in-memory stores (unit) and
 * the DynamoDB adapter (integration), so the two cannot drift.
 */
export function runStoreContract(name: string, stores: () => Stores): void {
  describe(`the run store contract (${name})`, () => {
    it('appends each change with its events, in seq order on one chain', async () => {
      const { runs } = stores();
      const run = newRun();
      await runs.create(run, [event('run.created')], undefined);
      const committed = await runs.mutate(run.runId, () => ({
        run: { status: 'running' },
        events: [event('run.started')],
      }));
      expect(committed?.record.run.status).toBe('running');
      const log = await runs.events(run.runId, 0, 10);
      expect(log.map((e) => [e.seq, e.type])).toEqual([
        [1, 'run.created'],
        [2, 'run.started'],
      ]);
      expect(log[1]?.prevHash).toBe(log[0]?.hash);
      expect((await runs.load(run.runId))?.head).toEqual(committed?.record.head);
    });

    it('refuses the whole change with a StaleWriteError when one write no longer applies', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const change = () => ({
        events: [event('step.started')],
        writes: [writes.updateExecution({ ...execution, status: 'running' as const }, ['leased'], 'worker-a')],
      });
      await expect(runs.mutate(run.runId, change)).rejects.toBeInstanceOf(StaleWriteError);
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.type)).toEqual(['run.created', 'step.dispatched']);
      expect((await runs.execution(run.runId, execution.executionId))?.status).toBe('pending');
    });

    it('appends events on a held head, leaves the run entity as it is, and chains again on a stale head', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const held = await runs.load(run.runId);
      if (!held) throw new Error('no run');
      await runs.acquireLease(run.runId, execution.executionId, 'worker-a', new Date(NOW), 30_000);
      const leased = { ...execution, status: 'leased' as const, leaseOwner: 'worker-a' };
      const appended = await runs.append(
        run,
        {
          events: [event('step.started')],
          writes: [writes.updateExecution({ ...leased, status: 'running' }, ['leased'], 'worker-a')],
        },
        held.head,
      );
      expect(appended.head.seq).toBe(held.head.seq + 1);
      // Another writer moves the chain; an append on the old head chains on the new one.
      await runs.mutate(run.runId, () => ({ events: [event('run.cancel_requested')], run: { cancelRequested: true } }));
      const again = await runs.append(run, { events: [event('step.output', { text: 'hi' })] }, appended.head);
      const log = await runs.events(run.runId, 0, 10);
      expect(log.map((e) => e.type)).toEqual([
        'run.created',
        'step.dispatched',
        'step.started',
        'run.cancel_requested',
        'step.output',
      ]);
      expect(verifyChain(log).valid).toBe(true);
      expect(again.head).toEqual({ seq: 5, hash: log[4]?.hash });
      const after = await runs.load(run.runId);
      expect(after?.head).toEqual(again.head);
      expect(after?.run.cancelRequested).toBe(true);
      // A writer holding the run from before the appends decides again on fresh state.
      const seen: number[] = [];
      await runs.mutate(
        run.runId,
        (record) => {
          seen.push(record.head.seq);
          return { events: [event('run.started')] };
        },
        held,
      );
      expect(seen).toEqual([held.head.seq, 5]);
      expect((await runs.execution(run.runId, execution.executionId))?.status).toBe('running');
    });

    it('carries a record as data: held again, it is decided on without a read, and refused once the run changed', async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      const loaded = await runs.load(run.runId);
      if (!loaded) throw new Error('no run');
      // Only a record the store read or wrote can travel; a copy has no revision to be checked by.
      expect(runs.carry({ ...loaded })).toBeUndefined();
      const travelled = () => JSON.parse(JSON.stringify(runs.carry(loaded))) as Parameters<RunStore['hold']>[0];
      const carried = travelled();
      expect(carried.record).toEqual(loaded);

      const decidedOn: unknown[] = [];
      const held = runs.hold(carried);
      const committed = await runs.mutate(
        run.runId,
        (record) => {
          decidedOn.push(record);
          return { run: { currentStepId: 'one' }, events: [] };
        },
        held,
      );
      expect(decidedOn).toEqual([held]);
      expect(decidedOn[0]).toBe(held);
      // That change appended nothing, so the head stayed: only the revision tells the run changed.
      expect(committed?.record.head).toEqual(loaded.head);

      const seen: (string | undefined)[] = [];
      await runs.mutate(
        run.runId,
        (record) => {
          seen.push(record.run.currentStepId);
          return { events: [event('run.started')] };
        },
        runs.hold(carried),
      );
      expect(seen).toEqual([undefined, 'one']);
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.type)).toEqual([
        'run.created',
        'step.dispatched',
        'run.started',
      ]);
      // What a write leaves can travel too.
      const after = await runs.load(run.runId);
      expect(after && runs.carry(after)?.record).toEqual(after);
    });

    it('answers a create with the run as stored, which can travel to the first write and is refused once the run changed', async () => {
      const { runs } = stores();
      const run = newRun();
      const created = await runs.create(run, [event('run.created')], undefined);
      if (!created.created) throw new Error('not created');
      expect(created.record).toEqual(await runs.load(run.runId));
      const carried = JSON.parse(JSON.stringify(runs.carry(created.record))) as Parameters<RunStore['hold']>[0];
      expect(carried.record).toEqual(created.record);

      // Held as it travelled, the first write decides on it without a read and commits.
      const decidedOn: unknown[] = [];
      const held = runs.hold(carried);
      await runs.mutate(
        run.runId,
        (record) => {
          decidedOn.push(record);
          return { run: { currentStepId: 'one' }, events: [event('run.started')] };
        },
        held,
      );
      expect(decidedOn).toEqual([held]);

      // The same carried run, held again after that write, is refused and the run read as it is.
      const seen: (string | undefined)[] = [];
      await runs.mutate(
        run.runId,
        (record) => {
          seen.push(record.run.currentStepId);
          return { events: [event('step.output', { text: 'x' })] };
        },
        runs.hold(carried),
      );
      expect(seen).toEqual([undefined, 'one']);
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.type)).toEqual([
        'run.created',
        'run.started',
        'step.output',
      ]);
    });

    it('reads a run with its step executions, and nothing else of its partition, in one snapshot', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      // Items of the partition on either side of the range: an aggregate (before), a wait token (after).
      await runs.putWaitToken(run.runId, 'resume', 'token-w', new Date().toISOString());
      const snapshot = await runs.snapshot(run.runId);
      expect(snapshot?.record).toEqual(await runs.load(run.runId));
      expect(snapshot?.executions).toEqual(await runs.executions(run.runId));
      expect(snapshot?.executions.map((e) => e.executionId)).toEqual([execution.executionId]);
      // Its record travels, as a loaded one does.
      expect(snapshot && runs.carry(snapshot.record)?.record).toEqual(snapshot?.record);
      expect(await runs.snapshot(`${run.runId}-missing`)).toBeUndefined();
    });

    it("refuses a carried record whose head or tenant is not the run's, even at its revision", async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      const loaded = await runs.load(run.runId);
      const carried = loaded && runs.carry(loaded);
      if (!carried) throw new Error('no run');
      const forged = [
        { ...carried, record: { ...carried.record, head: { ...carried.record.head, hash: 'f'.repeat(64) } } },
        { ...carried, record: { ...carried.record, run: { ...carried.record.run, tenantId: 'someone-else' } } },
      ];
      for (const one of forged) {
        const decidedOn: string[] = [];
        await runs.mutate(
          run.runId,
          (record) => {
            decidedOn.push(`${record.run.tenantId} ${record.head.hash.slice(0, 4)}`);
            return { events: [event('step.output', { text: 'x' })] };
          },
          runs.hold(one),
        );
        // Decided on the forged record first, refused, then on the stored run.
        expect(decidedOn).toHaveLength(2);
        expect(decidedOn[1]).toMatch(/^tenant-contract /);
      }
      const log = await runs.events(run.runId, 0, 10);
      expect(verifyChain(log).valid).toBe(true);
      expect(log.every((e) => e.tenantId === 'tenant-contract')).toBe(true);
    });

    it("chains again when the held head's hash is not the run's, and appends nothing in another tenant", async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      const held = await runs.load(run.runId);
      if (!held) throw new Error('no run');
      const forged = { seq: held.head.seq, hash: 'f'.repeat(64) };
      await runs.append(run, { events: [event('step.output', { text: 'a' })] }, forged);
      expect(verifyChain(await runs.events(run.runId, 0, 10)).valid).toBe(true);
      await expect(
        runs.append({ ...run, tenantId: 'someone-else' }, { events: [event('step.output', { text: 'b' })] }),
      ).rejects.toThrow(/does not exist in tenant someone-else/);
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.payload.text)).toEqual([undefined, undefined, 'a']);
    });

    it('completes a one-execution aggregate with the count of its result, and refuses that on a larger one', async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      await runs.mutate(run.runId, () => ({
        events: [event('step.dispatched')],
        writes: [writes.putAggregate(run.runId, { ...aggregate, stepId: 'two', total: 2 })],
      }));
      await expect(
        runs.mutate(run.runId, () => ({
          events: [event('step.succeeded')],
          writes: [writes.countResult(run.runId, 'step', 'two', 1, true, true)],
        })),
      ).rejects.toBeInstanceOf(StaleWriteError);
      await runs.mutate(run.runId, () => ({
        events: [event('step.succeeded')],
        writes: [writes.countResult(run.runId, 'step', 'one', 1, false, true)],
      }));
      expect(await runs.aggregate(run.runId, 'step', 'one', 1)).toMatchObject({ done: 1, failed: 1, completed: true });
      expect(await runs.claimCompletion(run.runId, 'step', 'one', 1)).toBeUndefined();
      expect(await runs.aggregate(run.runId, 'step', 'two', 1)).toMatchObject({ done: 0, completed: false });
    });

    it('appends nothing and throws a StaleWriteError when a write of the append no longer applies', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const change = {
        events: [event('step.started')],
        writes: [writes.updateExecution({ ...execution, status: 'running' as const }, ['leased'], 'worker-a')],
      };
      await expect(runs.append(run, change)).rejects.toBeInstanceOf(StaleWriteError);
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.type)).toEqual(['run.created', 'step.dispatched']);
    });

    it('decides again on fresh state when the record it was given is no longer current', async () => {
      const { runs } = stores();
      const run = newRun();
      await runs.create(run, [event('run.created')], undefined);
      const held = await runs.load(run.runId);
      await runs.mutate(run.runId, () => ({ events: [], rollbackRequested: true }));
      const seen: boolean[] = [];
      const committed = await runs.mutate(
        run.runId,
        (record) => {
          seen.push(record.rollbackRequested);
          return { events: [event('run.started')] };
        },
        held,
      );
      expect(seen).toEqual([false, true]);
      expect(committed?.record.rollbackRequested).toBe(true);
      expect((await runs.load(run.runId))?.rollbackRequested).toBe(true);
    });

    it('gives a pending execution to one worker only', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const now = new Date();
      const first = await runs.acquireLease(run.runId, execution.executionId, 'worker-a', now, 30_000);
      const second = await runs.acquireLease(run.runId, execution.executionId, 'worker-b', now, 30_000);
      expect(first).toMatchObject({ claim: 'lease', execution: { status: 'leased', leaseOwner: 'worker-a' } });
      expect(second).toEqual({ claim: 'held' });
      expect(
        await runs.renewLease(run.runId, execution.executionId, 'worker-b', new Date(now.getTime() + 60_000)),
      ).toBe(false);
      expect(
        await runs.renewLease(run.runId, execution.executionId, 'worker-a', new Date(now.getTime() + 60_000)),
      ).toBe(true);
    });

    it('hands a lapsed lease of an execution that never started to the next worker', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const then = new Date();
      await runs.acquireLease(run.runId, execution.executionId, 'worker-a', then, 1_000);
      const later = new Date(then.getTime() + 5_000);
      const taken = await runs.acquireLease(run.runId, execution.executionId, 'worker-b', later, 30_000);
      expect(taken).toMatchObject({ claim: 'lease', execution: { status: 'leased', leaseOwner: 'worker-b' } });
      if (taken.claim !== 'lease') return;
      expect(Date.parse(taken.execution.leaseExpiresAt ?? '')).toBe(later.getTime() + 30_000);
      expect(await runs.execution(run.runId, execution.executionId)).toMatchObject({ leaseOwner: 'worker-b' });
    });

    it('returns a started execution whose lease lapsed as lost, and an ended one as ended', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const then = new Date();
      const lease = await runs.acquireLease(run.runId, execution.executionId, 'worker-a', then, 1_000);
      if (lease.claim !== 'lease') throw new Error('no lease');
      const running: StepExecution = { ...lease.execution, status: 'running', startedAt: then.toISOString() };
      await runs.mutate(run.runId, () => ({
        events: [],
        writes: [writes.updateExecution(running, ['leased'], 'worker-a')],
      }));
      const later = new Date(then.getTime() + 5_000);
      const lost = await runs.acquireLease(run.runId, execution.executionId, 'worker-b', later, 30_000);
      expect(lost).toMatchObject({ claim: 'lost', execution: { status: 'running', leaseOwner: 'worker-a' } });
      const ended: StepExecution = { ...running, status: 'succeeded', endedAt: later.toISOString() };
      await runs.mutate(run.runId, () => ({
        events: [],
        writes: [writes.updateExecution(ended, ['running'], 'worker-a')],
      }));
      expect(await runs.acquireLease(run.runId, execution.executionId, 'worker-b', later, 30_000)).toEqual({
        claim: 'ended',
      });
      expect(await runs.acquireLease(run.runId, 'no-such-execution', 'worker-b', later, 30_000)).toEqual({
        claim: 'ended',
      });
    });

    it('completes an aggregate for exactly one caller once every target is counted', async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      expect(await runs.claimCompletion(run.runId, 'step', 'one', 1)).toBeUndefined();
      await runs.mutate(run.runId, () => ({
        events: [],
        writes: [writes.countResult(run.runId, 'step', 'one', 1, true)],
      }));
      const claims = await Promise.all([
        runs.claimCompletion(run.runId, 'step', 'one', 1),
        runs.claimCompletion(run.runId, 'step', 'one', 1),
      ]);
      expect(claims.filter(Boolean)).toEqual([expect.objectContaining({ succeeded: 1, done: 1, taskToken: 't1' })]);
      await expect(
        runs.mutate(run.runId, () => ({ events: [], writes: [writes.countResult(run.runId, 'step', 'one', 1, true)] })),
      ).rejects.toBeInstanceOf(StaleWriteError);
    });

    it('lists the active runs created before a time oldest first, and goes on after a given run', async () => {
      const { runs } = stores();
      // Older than every other run of the suite, so the listing holds these alone.
      const old = [0, 1, 2].map((i) => ({ ...newRun(), createdAt: `2000-01-01T00:00:0${i}.000Z` }));
      for (const run of [...old].reverse()) await runs.create(run, [event('run.created')], undefined);
      const before = new Date('2000-01-02T00:00:00.000Z');

      const first = await runs.activeRuns(before, 2);
      expect(first.map((r) => r.run.runId)).toEqual([old[0]!.runId, old[1]!.runId]);
      const rest = await runs.activeRuns(before, 2, first[1]!.run);
      expect(rest.map((r) => r.run.runId)).toEqual([old[2]!.runId]);
    });

    it('returns the first run for a repeated idempotency key', async () => {
      const { runs } = stores();
      const first = newRun();
      const second = newRun();
      const key = { key: `k-${first.runId}`, requestHash: 'h' };
      expect(await runs.create(first, [event('run.created')], key)).toMatchObject({ created: true });
      expect(await runs.create(second, [event('run.created')], key)).toEqual({
        created: false,
        runId: first.runId,
        requestHash: 'h',
      });
      expect(await runs.load(second.runId)).toBeUndefined();
    });

    it('keeps staged events out of the chain until the inbox is sequenced, then chains them gap-free in lane order', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const at = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000Z`;
      const timed = (type: EventDraft['type'], s: number, targetId: string): EventDraft => ({
        ...event(type),
        timestamp: at(s),
        targetId,
      });
      // Lane b's second event carries an earlier clock than its first: its lane order still holds.
      const a = laneEvents('lane-a', undefined, [timed('step.started', 1, 'a'), timed('step.output', 3, 'a')]);
      const b = laneEvents('lane-b', undefined, [timed('step.started', 2, 'b'), timed('step.output', 1, 'b')]);
      await runs.stage(run.runId, a.staged, [writes.updateExecution({ ...execution, status: 'running' }, ['pending'])]);
      await runs.stage(run.runId, b.staged, []);
      expect((await runs.execution(run.runId, execution.executionId))?.status).toBe('running');
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.type)).toEqual(['run.created', 'step.dispatched']);

      await runs.sequence(run.runId);
      const log = await runs.events(run.runId, 0, 10);
      expect(log.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(verifyChain(log)).toMatchObject({ valid: true, count: 6 });
      const lane = (id: string) => log.filter((e) => e.targetId === id).map((e) => e.type);
      expect(lane('a')).toEqual(['step.started', 'step.output']);
      expect(lane('b')).toEqual(['step.started', 'step.output']);
      expect((await runs.load(run.runId))?.head).toEqual({ seq: 6, hash: log[5]?.hash });
      // Nothing is left to sequence, and a change on the head goes on from the sequenced chain.
      await runs.sequence(run.runId);
      await runs.mutate(run.runId, () => ({ events: [event('run.succeeded')] }));
      expect(verifyChain(await runs.events(run.runId, 0, 10)).valid).toBe(true);
    });

    it('stages nothing when a write of the change no longer applies', async () => {
      const { runs } = stores();
      const { run, execution } = await dispatched(runs);
      const { staged } = laneEvents('lane-a', undefined, [event('step.started')]);
      await expect(
        runs.stage(run.runId, staged, [writes.updateExecution({ ...execution, status: 'running' }, ['leased'], 'w')]),
      ).rejects.toBeInstanceOf(StaleWriteError);
      await runs.sequence(run.runId);
      expect((await runs.events(run.runId, 0, 10)).map((e) => e.type)).toEqual(['run.created', 'step.dispatched']);
    });

    it('sequences a large inbox in several batches, and concurrent sequencers neither drop nor repeat an event', async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      const lanes = Array.from({ length: 12 }, (_, i) =>
        laneEvents(
          `lane-${String(i).padStart(2, '0')}`,
          undefined,
          Array.from({ length: 10 }, (_, n) => ({ ...event('step.output', { n }), targetId: `t${i}` })),
        ),
      );
      await Promise.all(lanes.map((l) => runs.stage(run.runId, l.staged, [])));
      await Promise.all([runs.sequence(run.runId), runs.sequence(run.runId), runs.sequence(run.runId)]);
      const log = await runs.events(run.runId, 0, 500);
      expect(log).toHaveLength(2 + 120);
      expect(verifyChain(log).valid).toBe(true);
      expect(new Set(log.map((e) => e.eventId)).size).toBe(log.length);
      for (let i = 0; i < 12; i++)
        expect(log.filter((e) => e.targetId === `t${i}`).map((e) => e.payload.n)).toEqual([
          0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
        ]);
    });

    it('names a run whose staged events have waited past the grace, for the sweep to sequence', async () => {
      const { runs } = stores();
      const { run } = await dispatched(runs);
      const staged: StagedEvent[] = laneEvents('lane-a', undefined, [event('step.started')]).staged;
      await runs.stage(run.runId, staged, []);
      expect(await runs.stalledInboxes(new Date('2027-01-01T00:00:00Z'), 1000)).toContain(run.runId);
      expect(await runs.stalledInboxes(new Date('2025-01-01T00:00:00Z'), 1000)).not.toContain(run.runId);
      await runs.sequence(run.runId);
      expect(await runs.stalledInboxes(new Date('2027-01-01T00:00:00Z'), 1000)).not.toContain(run.runId);
    });

    it('hands a wait token to one claimer', async () => {
      const { runs } = stores();
      const run = newRun();
      await runs.putWaitToken(run.runId, 'approval', 'token-1', NOW);
      expect(await runs.claimWaitToken(run.runId, 'approval')).toBe('token-1');
      expect(await runs.claimWaitToken(run.runId, 'approval')).toBeUndefined();
    });
  });
}

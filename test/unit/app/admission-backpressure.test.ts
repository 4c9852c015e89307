import { describe, expect, it } from 'vitest';
import { makeAdmission } from '../../../shared/app/admission.js';
import { makeBackpressure } from '../../../shared/app/backpressure.js';
import type { AdmissionStore } from '../../../shared/app/ports/admission.js';
import { makeInMemoryAdmissionStore } from '../../../shared/app/ports/in-memory/admission.js';
import { makeFakeClock, makeInMemoryRunbooks } from '../../../shared/app/ports/in-memory/fakes.js';
import { makeSettableQueueDepth } from '../../../shared/app/ports/in-memory/queue-depth.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { Priority, Run } from '../../../shared/domain/entities.js';
import { aRunbookVersion } from '../../support/runs.js';

const MAX_BACKLOG = 10;

async function setup(wrap: (store: AdmissionStore) => AdmissionStore = (store) => store) {
  const clock = makeFakeClock();
  const { runs, cells } = makeInMemoryStores();
  const admissionStore = wrap(makeInMemoryAdmissionStore(cells));
  const runbooks = makeInMemoryRunbooks();
  const depth = makeSettableQueueDepth();
  const started: string[] = [];
  for (const tenantId of ['flood', 'quiet'])
    await runbooks.putVersion(aRunbookVersion({ tenantId, digest: 'd1', createdBy: 'someone' }), undefined);
  const admission = makeAdmission({
    runs,
    admission: admissionStore,
    clock,
    starter: {
      start: async (run) => {
        started.push(run.runId);
        return `arn:${run.runId}`;
      },
    },
    backpressure: makeBackpressure({ depth, runbooks, maxBacklog: () => MAX_BACKLOG }),
  });
  let n = 0;
  async function create(tenantId: string, priority: Priority = 'normal'): Promise<Run> {
    clock.advance(1);
    const at = clock.now().toISOString();
    const run = {
      runId: `run-${tenantId}-${++n}`,
      tenantId,
      runbookId: 'rb',
      runbookVersion: 1,
      runbookDigest: 'd1',
      status: 'queued',
      inputs: {},
      priority,
      requestedBy: 'someone',
      createdAt: at,
      updatedAt: at,
      cancelRequested: false,
    } satisfies Run;
    await runs.create(run, [], undefined);
    return run;
  }
  const statusOf = async (runId: string) => (await runs.load(runId))?.run.status;
  return { admission, depth, create, started, statusOf, runs };
}

describe('admission backpressure', () => {
  it('admits a new run while its profile queue is below the bound', async () => {
    const { admission, depth, create, started } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG - 1 });
    const run = await create('flood');
    expect(await admission.afterCreate(run)).toBe('started');
    expect(started).toEqual([run.runId]);
  });

  it('throttles a new run with the backlog limit while its profile queue is at the bound', async () => {
    const { admission, depth, create, started, statusOf, runs } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG });
    const run = await create('flood');
    expect(await admission.afterCreate(run)).toBe('throttled');
    expect(started).toEqual([]);
    expect(await statusOf(run.runId)).toBe('throttled');
    const [throttled] = (await runs.events(run.runId, 0, 10)).filter((e) => e.type === 'run.throttled');
    expect(throttled?.payload).toMatchObject({ limit: 'backlog', source: 'dev-flex' });
    expect(Date.parse(String(throttled?.payload.nextEligibleAt))).toBeGreaterThan(0);
    expect((await runs.load(run.runId))?.run.nextEligibleAt).toBeDefined();
  });

  it('still admits a held run when a backlog pass ran between its tenant’s note and its backlog place', async () => {
    // The pass finds the tenant noted but no place yet, and clears the note; the place lands after.
    const hooks: { pass?: () => Promise<number> } = {};
    let interleaved = false;
    const { admission, depth, create, started, statusOf } = await setup((store) => ({
      ...store,
      async markBacklog(tenantId, mark) {
        await store.markBacklog(tenantId, mark);
        if (hooks.pass && !interleaved) {
          interleaved = true;
          expect(await hooks.pass()).toBe(0);
        }
      },
    }));
    hooks.pass = () => admission.admitBacklog();
    depth.set('dev-flex', { visible: MAX_BACKLOG });
    const run = await create('flood');
    expect(await admission.afterCreate(run)).toBe('throttled');
    expect(interleaved).toBe(true);
    depth.set('dev-flex', { visible: 0 });
    expect(await admission.admitBacklog()).toBe(1);
    expect(started).toEqual([run.runId]);
    expect(await statusOf(run.runId)).toBe('queued');
  });

  it('lets an emergency run through a full queue', async () => {
    const { admission, depth, create } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG * 5 });
    expect(await admission.afterCreate(await create('flood', 'emergency'))).toBe('started');
  });

  it('admits held runs once the backlog falls, no more in one pass than the queue has room for', async () => {
    const { admission, depth, create, started, statusOf } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG + 5 });
    const held = [];
    for (let i = 0; i < 8; i++) {
      const run = await create('flood');
      await admission.afterCreate(run);
      held.push(run);
    }
    expect(await admission.admitBacklog()).toBe(0);
    depth.set('dev-flex', { visible: MAX_BACKLOG - 3 });
    expect(await admission.admitBacklog()).toBe(3);
    expect(started).toEqual(held.slice(0, 3).map((r) => r.runId));
    depth.set('dev-flex', { visible: 0 });
    expect(await admission.admitBacklog()).toBe(5);
    expect(await Promise.all(held.map((r) => statusOf(r.runId)))).toEqual(Array(8).fill('queued'));
  });

  it('shares a freed queue between tenants in turn, so a flood does not take it all', async () => {
    const { admission, depth, create, started } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG });
    const flood = [];
    for (let i = 0; i < 20; i++) flood.push(await create('flood'));
    for (const run of flood) await admission.afterCreate(run);
    const quiet = [];
    for (let i = 0; i < 3; i++) quiet.push(await create('quiet'));
    for (const run of quiet) await admission.afterCreate(run);
    depth.set('dev-flex', { visible: MAX_BACKLOG - 6 });
    expect(await admission.admitBacklog()).toBe(6);
    expect(started.filter((id) => id.includes('quiet'))).toHaveLength(3);
    expect(started.filter((id) => id.includes('flood'))).toHaveLength(3);
  });
});

describe('admission fairness under backpressure', () => {
  it('gives a queue that frees one place per pass to each tenant in turn, whatever their names', async () => {
    const { admission, depth, create, started } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG });
    for (let i = 0; i < 6; i++) await admission.afterCreate(await create('flood'));
    for (let i = 0; i < 2; i++) await admission.afterCreate(await create('quiet'));
    depth.set('dev-flex', { visible: MAX_BACKLOG - 1 });
    for (let pass = 0; pass < 4; pass++) expect(await admission.admitBacklog()).toBe(1);
    expect(started.map((id) => id.split('-')[1])).toEqual(['flood', 'quiet', 'flood', 'quiet']);
  });

  it('hands the room a flooding tenant’s ended run leaves in a shared queue to the other tenant first', async () => {
    const { admission, depth, create, started, runs } = await setup();
    depth.set('dev-flex', { visible: MAX_BACKLOG - 1 });
    const running = await create('flood');
    await admission.afterCreate(running);
    depth.set('dev-flex', { visible: MAX_BACKLOG });
    for (let i = 0; i < 3; i++) await admission.afterCreate(await create('flood'));
    const quiet = await create('quiet');
    await admission.afterCreate(quiet);
    await runs.mutate(running.runId, () => ({
      run: { status: 'succeeded', endedAt: new Date().toISOString() },
      events: [],
    }));
    depth.set('dev-flex', { visible: MAX_BACKLOG - 1 });
    await admission.onRunEnded(running.runId, 'flood');
    expect(started.slice(1)).toEqual([quiet.runId]);
  });
});

import { describe, expect, it } from 'vitest';
import { makeQuotaControls } from '../../../shared/app/admission-controls.js';
import { makeAdmission } from '../../../shared/app/admission.js';
import { makeBackpressure } from '../../../shared/app/backpressure.js';
import { makeInMemoryAdmissionStore } from '../../../shared/app/ports/in-memory/admission.js';
import { makeFakeClock, makeInMemoryRunbooks } from '../../../shared/app/ports/in-memory/fakes.js';
import { makeSettableQueueDepth } from '../../../shared/app/ports/in-memory/queue-depth.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import { makeRegisterRunbook } from '../../../shared/app/runbooks.js';
import { createRunBodySchema, makeCreateRun } from '../../../shared/app/runs.js';
import type { Principal } from '../../../shared/domain/entities.js';

const olive: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator'] };
const ada: Principal = { subject: 'ada', tenantId: 'acme', roles: ['admin'] };

/** createRun through admission on in-memory ports; `around` wraps the run store's create. */
async function world(around?: (create: RunStore['create']) => RunStore['create']) {
  const clock = makeFakeClock();
  const stores = makeInMemoryStores();
  const seen: string[] = [];
  const inner = makeInMemoryAdmissionStore(stores.cells);
  const admissionStore: typeof inner = {
    ...inner,
    cells: async (...args) => {
      seen.push(`cells ${args[1]}`);
      return inner.cells(...args);
    },
  };
  const create = stores.runs.create.bind(stores.runs);
  const runs: RunStore = {
    ...stores.runs,
    create: async (...args) => {
      seen.push('create begins');
      const stored = await (around ? around(create) : create)(...args);
      seen.push('create ends');
      return stored;
    },
  };
  const started: string[] = [];
  const starter = {
    start: async (run: { runId: string }) => {
      started.push(run.runId);
      return `arn:execution:${run.runId}`;
    },
  };
  const runbooks = makeInMemoryRunbooks();
  await makeRegisterRunbook({ runbooks, clock })({
    principal: olive,
    format: 'json',
    source: JSON.stringify({
      name: 'unit',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      steps: [{ id: 'one', backend: 'test', action: 'echo', params: { message: 'hi' } }],
    }),
  });
  const queue = makeSettableQueueDepth();
  const depth: typeof queue = {
    ...queue,
    depth: async (profile) => {
      seen.push(`depth ${profile}`);
      return queue.depth(profile);
    },
  };
  const backpressure = makeBackpressure({ depth, runbooks, maxBacklog: () => 10 });
  const admission = makeAdmission({ runs, admission: admissionStore, starter, clock, backpressure });
  const createRun = makeCreateRun({ runbooks, runs, clock, starter, admission });
  const quotas = makeQuotaControls({ admission: admissionStore, clock });
  const createOne = (body: object = {}) =>
    createRun({ principal: olive, body: createRunBodySchema.parse({ runbookId: 'unit', ...body }) });
  return { createOne, quotas, seen, started, runs, queue };
}

describe('creating a run through admission', () => {
  it("reads the tenant's controls beside the create's transaction, not after it", async () => {
    const { createOne, seen, started } = await world();
    const { runId, status } = await createOne();
    expect(status).toBe('queued');
    expect(started).toEqual([runId]);
    const controlsRead = seen.indexOf('cells c#');
    expect(controlsRead).toBeGreaterThanOrEqual(0);
    expect(controlsRead).toBeLessThan(seen.indexOf('create ends'));
    // Read once: the admission decides on the read it started early.
    expect(seen.filter((s) => s === 'cells c#')).toHaveLength(1);
  });

  it("reads the profile queue's backlog beside the create's transaction too, and holds the run back on it", async () => {
    // The transaction takes a turn of the event loop, as a real one does.
    const { createOne, seen, started, queue } = await world((create) => async (...args) => {
      await new Promise((resolve) => setImmediate(resolve));
      return create(...args);
    });
    const first = await createOne();
    expect(started).toEqual([first.runId]);
    expect(seen.indexOf('depth dev-flex')).toBeGreaterThanOrEqual(0);
    expect(seen.indexOf('depth dev-flex')).toBeLessThan(seen.indexOf('create ends'));
    expect(seen.filter((s) => s === 'depth dev-flex')).toHaveLength(1);
    // A queue past its bound holds the next run back, on the same early read.
    queue.set('dev-flex', { visible: 10 });
    const second = await createOne();
    expect(second.status).toBe('throttled');
    expect(started).toEqual([first.runId]);
  });

  it('holds a run back when another run took the last active slot while its controls were being read', async () => {
    let racer: (() => Promise<unknown>) | undefined;
    const { createOne, quotas, started, runs } = await world((create) => async (...args) => {
      // While this create is under way (its controls already read, with a free slot), another
      // run of the same runbook is created and admitted, taking the quota's only slot.
      const other = racer;
      racer = undefined;
      if (other) await other();
      return create(...args);
    });
    await quotas.set(ada, 'unit', { maxActive: 1 }, false);
    let first: string | undefined;
    racer = async () => (first = (await createOne()).runId);
    const second = await createOne();
    expect(first).toBeDefined();
    expect(started).toEqual([first]);
    expect(second.status).toBe('throttled');
    expect((await runs.load(second.runId))?.run).toMatchObject({ status: 'throttled', heldBy: { limit: 'maxActive' } });
  });
});

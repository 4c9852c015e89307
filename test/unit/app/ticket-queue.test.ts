import { describe, expect, it } from 'vitest';
import { makeAdmission } from '../../../shared/app/admission.js';
import { makeInMemoryAdmissionStore } from '../../../shared/app/ports/in-memory/admission.js';
import { makeFakeClock, makeInMemoryRunbooks } from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import { makeCreateRun } from '../../../shared/app/runs.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import { lastInLine } from '../../../shared/app/ticket-queue.js';
import type { Principal, Run } from '../../../shared/domain/entities.js';
import { TicketBusyError } from '../../../shared/domain/intake/ticket.js';
import { aRunbookVersion } from '../../support/runs.js';

const principal: Principal = { subject: 'jira:jira', tenantId: 't', roles: ['operator'] };

async function setUp(wrap: (runs: RunStore) => RunStore = (runs) => runs) {
  const stores = makeInMemoryStores();
  const runs = wrap(stores.runs);
  const { cells } = stores;
  const runbooks = makeInMemoryRunbooks();
  const clock = makeFakeClock();
  const started: string[] = [];
  const starter = {
    start: async (run: Run) => {
      started.push(run.runId);
      return `arn:execution:${run.runId}`;
    },
  };
  await runbooks.putVersion(
    aRunbookVersion({
      tenantId: 't',
      digest: 'd',
      createdBy: 'ada',
      definition: {
        name: 'rb',
        environment: 'dev',
        sandbox_profile: 'dev-flex',
        steps: [{ id: 'a', backend: 'test', action: 'echo', params: { message: 'hi' } }],
      },
    }),
    undefined,
  );
  const admission = makeAdmission({ runs, admission: makeInMemoryAdmissionStore(cells), starter, clock });
  const createRun = makeCreateRun({ runbooks, runs, starter, clock, admission });
  const create = (key: string, onActive?: 'refuse' | 'queue') =>
    createRun({
      principal,
      body: { runbookId: 'rb', inputs: {}, priority: 'normal', ticket: { id: 'INC-1', source: 'jira' } },
      idempotencyKey: key,
      ...(onActive && { onActive }),
    });
  /** Ends a run the way the interpreter does, then tells admission as the admitter would. */
  const end = async (runId: string, status: 'succeeded' | 'failed') => {
    const now = clock.now().toISOString();
    await runs.mutate(runId, () => ({
      run: { status, endedAt: now, updatedAt: now },
      events: [{ eventId: `end-${runId}`, type: `run.${status}`, timestamp: now, payload: {}, meta: {} }],
    }));
    await admission.onRunEnded(runId, 't');
  };
  /** Ends a run without telling admission: the admitter never hears of it. */
  const endSilently = async (runId: string) => {
    const now = clock.now().toISOString();
    await runs.mutate(runId, () => ({
      run: { status: 'succeeded', endedAt: now, updatedAt: now },
      events: [{ eventId: `end-${runId}`, type: 'run.succeeded', timestamp: now, payload: {}, meta: {} }],
    }));
  };
  return { runs, started, create, end, endSilently, admission };
}

describe('runs queued behind their ticket', () => {
  it('refuses a second run for a busy ticket unless asked to queue it', async () => {
    const { create } = await setUp();
    await create('k-1');
    await expect(create('k-2')).rejects.toBeInstanceOf(TicketBusyError);
  });

  it('starts queued runs one after another as each run ahead ends, whatever its outcome', async () => {
    const { runs, started, create, end } = await setUp();
    const first = await create('k-1');
    const second = await create('k-2', 'queue');
    const third = await create('k-3', 'queue');
    expect([second.status, third.status]).toEqual(['queued', 'queued']);
    expect((await runs.load(second.runId))?.run.queuedBehind).toBe(first.runId);
    expect((await runs.load(third.runId))?.run.queuedBehind).toBe(second.runId);
    expect(started).toEqual([first.runId]);

    await end(first.runId, 'failed');
    expect(started).toEqual([first.runId, second.runId]);
    const claimed = await runs.load(second.runId);
    expect(claimed?.run.queuedBehind).toBeUndefined();
    expect((await runs.events(second.runId, 0, 100)).map((e) => e.type)).toContain('run.ticket_claimed');
    // The ticket is held again: a new run that refuses is refused, naming the second run.
    await expect(create('k-4')).rejects.toMatchObject({ activeRunId: second.runId });

    await end(second.runId, 'succeeded');
    expect(started).toEqual([first.runId, second.runId, third.runId]);
  });

  it('starts a queued run whose new run ahead ended before the run noted that it waits behind it', async () => {
    let onListing: (() => Promise<void>) | undefined;
    const { started, create, endSilently, admission } = await setUp((runs) => ({
      ...runs,
      listByTicket: async (...args) => {
        const page = await runs.listByTicket(...args);
        // The race: the run found holding the ticket ends right after it is found.
        const race = onListing;
        onListing = undefined;
        await race?.();
        return page;
      },
    }));
    const first = await create('k-1');
    const second = await create('k-2', 'queue');
    await endSilently(first.runId);
    // An API call takes the free ticket before the second run hears that the first ended.
    const third = await create('k-3');
    expect(started).toEqual([first.runId, third.runId]);
    onListing = () => endSilently(third.runId);

    await admission.onRunEnded(first.runId, 't');
    expect(started).toEqual([first.runId, third.runId, second.runId]);
  });

  it('finds the end of a ticket’s line by following who waits behind whom, skipping runs that ended', () => {
    const at = (runId: string, status: Run['status'], queuedBehind?: string) =>
      ({ runId, status, ...(queuedBehind && { queuedBehind }) }) as Run;
    const line = [at('c', 'queued', 'b'), at('a', 'running'), at('b', 'queued', 'a'), at('x', 'cancelled', 'c')];
    expect(lastInLine(line, 'a')).toBe('c');
    expect(lastInLine([at('a', 'running')], 'a')).toBe('a');
  });
});

import { describe, expect, it } from 'vitest';
import { type IncidentCause, makeIncidents } from '../../../shared/app/incidents.js';
import { makeFakeClock, makeInMemoryRunbooks } from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { Principal, Run } from '../../../shared/domain/entities.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../../../shared/domain/errors.js';
import { aRunbookVersion } from '../../support/runs.js';

const operator: Principal = { subject: 'olive', tenantId: 't', roles: ['operator'] };

async function setUp(escalate: boolean | undefined) {
  const { runs } = makeInMemoryStores();
  const runbooks = makeInMemoryRunbooks();
  const clock = makeFakeClock();
  const told: Array<{ runId: string; cause: IncidentCause }> = [];
  await runbooks.putVersion(
    aRunbookVersion({
      tenantId: 't',
      digest: 'd',
      definition: {
        name: 'rb',
        environment: 'dev',
        sandbox_profile: 'dev-flex',
        ...(escalate !== undefined && { escalate_on_failure: escalate }),
        steps: [{ id: 'a', backend: 'test', action: 'fail', params: { message: 'boom' } }],
      },
    }),
    undefined,
  );
  const run: Run = {
    runId: 'run-00000000-0000-0000-0000-000000000001',
    tenantId: 't',
    runbookId: 'rb',
    runbookVersion: 1,
    runbookDigest: 'd',
    status: 'failed',
    inputs: {},
    priority: 'normal',
    requestedBy: 'olive',
    createdAt: clock.now().toISOString(),
    updatedAt: clock.now().toISOString(),
    cancelRequested: false,
    error: { code: 'STEP_FAILED', message: 'boom' },
  };
  await runs.create(run, [], undefined);
  const incidents = makeIncidents({
    runs,
    runbooks,
    clock,
    alerts: { raised: async (r, cause) => void told.push({ runId: r.runId, cause }) },
  });
  return { runs, incidents, told, runId: run.runId };
}

describe('incidents', () => {
  it('raises an incident once when a run of an escalating runbook fails, with its event and one alert', async () => {
    const { runs, incidents, told, runId } = await setUp(true);
    expect(await incidents.onRunFailed(runId)).toBe(true);
    expect(await incidents.onRunFailed(runId)).toBe(false);
    const record = await runs.load(runId);
    expect(record?.run.incident).toMatchObject({ reason: 'run_failed' });
    const events = (await runs.events(runId, 0, 100)).filter((e) => e.type === 'run.incident');
    expect(events).toHaveLength(1);
    expect(events[0]?.payload).toMatchObject({ kind: 'run_failed', error: { code: 'STEP_FAILED' } });
    expect(told).toEqual([{ runId, cause: { kind: 'run_failed' } }]);
  });

  it('raises nothing for a runbook that does not escalate failures', async () => {
    const { runs, incidents, told, runId } = await setUp(undefined);
    expect(await incidents.onRunFailed(runId)).toBe(false);
    expect((await runs.load(runId))?.run.incident).toBeUndefined();
    expect(told).toEqual([]);
  });

  it('records who acknowledged an incident, and refuses a second acknowledgement and a run without one', async () => {
    const { runs, incidents, runId } = await setUp(false);
    await expect(incidents.acknowledge(operator, runId)).rejects.toBeInstanceOf(ConflictError);
    await incidents.raise(runId, { kind: 'breaker_opened', runbookId: 'rb' });
    await expect(incidents.acknowledge({ ...operator, roles: ['viewer'] }, runId)).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(incidents.acknowledge({ ...operator, tenantId: 'other' }, runId)).rejects.toBeInstanceOf(
      NotFoundError,
    );
    const acknowledged = await incidents.acknowledge(operator, runId);
    expect(acknowledged).toMatchObject({ reason: 'breaker_opened', acknowledgedBy: 'olive' });
    await expect(incidents.acknowledge(operator, runId)).rejects.toBeInstanceOf(ConflictError);
    const acks = (await runs.events(runId, 0, 100)).filter((e) => e.type === 'run.incident_acknowledged');
    expect(acks.map((e) => e.payload.actor)).toEqual(['olive']);
  });
});

import { describe, expect, it } from 'vitest';
import { heldText, renderRun } from '../../../cli/render.js';
import { type RunDetail, runDetailSchema } from '../../../shared/resources/api-schemas.js';

const detail = (more: Partial<RunDetail>): RunDetail =>
  runDetailSchema.parse({
    runId: 'run-1',
    tenantId: 't',
    runbookId: 'rb',
    runbookVersion: 1,
    runbookDigest: 'd',
    status: 'queued',
    inputs: {},
    priority: 'normal',
    requestedBy: 'olive',
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    lastEventSeq: 1,
    steps: [],
    approvals: [],
    attempts: [],
    ...more,
  });

describe('runs show', () => {
  it('says which run of its ticket a queued run waits behind', () => {
    const text = renderRun(
      { color: false },
      detail({ queuedBehind: 'run-0', ticket: { id: 'INC-1', source: 'jira' } }),
    );
    expect(text).toMatch(/Waiting on:\s+the ticket's run run-0 to end/);
  });

  it('shows an incident and how to acknowledge it, then who acknowledged it', () => {
    const raised = detail({
      status: 'failed',
      incident: { raisedAt: '2026-01-01T00:01:00.000Z', reason: 'run_failed' },
    });
    expect(renderRun({ color: false }, raised)).toContain(
      'run_failed at 2026-01-01T00:01:00.000Z; acknowledge: capstan incidents ack run-1',
    );
    const acked = detail({
      status: 'failed',
      incident: { raisedAt: '2026-01-01T00:01:00.000Z', reason: 'run_failed', acknowledgedBy: 'olive' },
    });
    expect(renderRun({ color: false }, acked)).toContain('acknowledged by olive');
  });
});

describe('what holds a throttled run', () => {
  it('says a paused source waits until resumed, with the command that resumes it', () => {
    expect(heldText('paused', 'hello', '2026-01-01T00:00:05.000Z')).toBe(
      'hello is paused; it waits until resumed (capstan limits resume hello)',
    );
  });

  it('names a full quota and when admission looks again', () => {
    expect(heldText('maxActive', undefined, '2026-01-01T00:00:05.000Z')).toBe(
      'over its quota (maxActive); admission looks again at 2026-01-01T00:00:05.000Z',
    );
    expect(heldText('breaker', 'deploy', undefined)).toBe('the circuit breaker of deploy is open');
  });
});

import type { Run, RunbookVersion } from '../../shared/domain/entities.js';

/** A queued run as stored, with `more` over it: the fixture tests build runs from. */
export function aRun(more: Partial<Run> = {}): Run {
  return {
    runId: 'run-1',
    tenantId: 'acme',
    runbookId: 'rb',
    runbookVersion: 1,
    runbookDigest: 'digest',
    status: 'queued',
    inputs: {},
    priority: 'normal',
    requestedBy: 'olive',
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    cancelRequested: false,
    ...more,
  };
}

/** A stored runbook version (`rb` v1 on dev-flex, the runbook {@link aRun} names), with `more` over it. */
export function aRunbookVersion(more: Partial<RunbookVersion> = {}): RunbookVersion {
  return {
    tenantId: 'acme',
    runbookId: 'rb',
    version: 1,
    digest: 'digest',
    createdAt: '2026-01-01T00:00:00.000Z',
    createdBy: 'olive',
    definition: { name: 'rb', sandbox_profile: 'dev-flex' },
    ...more,
  };
}

import { describe, expect, it } from 'vitest';
import { type AppendedEvent, type LifecycleMessage, makePublishLifecycle } from '../../../shared/app/lifecycle.js';
import type { Run } from '../../../shared/domain/entities.js';

const run = {
  runId: 'run-1',
  tenantId: 't',
  runbookId: 'hello',
  runbookVersion: 1,
  status: 'running',
  ticket: { id: 'INC-1', source: 'snow' },
} as unknown as Run;
const event = (seq: number, type: string): AppendedEvent => ({
  runId: 'run-1',
  tenantId: 't',
  seq,
  type,
  eventId: `e${seq}`,
  timestamp: '2025-01-01T00:00:00.000Z',
  position: `p${seq}`,
});
const appended = [
  event(1, 'run.created'),
  event(2, 'step.started'),
  event(3, 'run.started'),
  event(4, 'run.succeeded'),
];

describe('lifecycle publication', () => {
  it('publishes only lifecycle events, in order, with the run, ticket and tenant', async () => {
    const sent: LifecycleMessage[] = [];
    const publish = makePublishLifecycle({
      bus: { publish: async (m) => (sent.push(...m), m.length) },
      runs: { load: async () => ({ run }) },
      log: () => undefined,
    });
    expect(await publish(appended)).toBeUndefined();
    expect(sent.map((m) => m.detailType)).toEqual(['run.created', 'run.started', 'run.succeeded']);
    expect(sent[0]!.detail).toMatchObject({ runId: 'run-1', tenantId: 't', ticket: { id: 'INC-1', source: 'snow' } });
  });

  it('describes a run from its run.created event on the stream, without reading the run', async () => {
    const sent: LifecycleMessage[] = [];
    let reads = 0;
    const publish = makePublishLifecycle({
      bus: { publish: async (m) => (sent.push(...m), m.length) },
      runs: { load: async () => (reads++, { run }) },
      log: () => undefined,
    });
    const created = {
      ...event(1, 'run.created'),
      payload: { runbookId: 'hello', runbookVersion: 2, ticket: { id: 'INC-2', source: 'jira' } },
    };
    expect(await publish([created, ...appended.slice(1)])).toBeUndefined();
    expect(reads).toBe(0);
    expect(sent.at(-1)?.detail).toMatchObject({ runbookVersion: 2, ticket: { id: 'INC-2', source: 'jira' } });
    // A run whose creation this publisher did not see is read once.
    await publish([{ ...event(5, 'run.succeeded'), runId: 'run-2' }]);
    expect(reads).toBe(1);
  });

  it('answers the position of the first message the bus refused, so the stream retries from there', async () => {
    const publish = makePublishLifecycle({
      bus: { publish: async () => 1 },
      runs: { load: async () => ({ run }) },
      log: () => undefined,
    });
    expect(await publish(appended)).toBe('p3');
  });

  it('logs and asks for a retry from the first event when the bus fails, never throwing', async () => {
    const logged: string[] = [];
    const publish = makePublishLifecycle({
      bus: { publish: async () => Promise.reject(new Error('bus down')) },
      runs: { load: async () => ({ run }) },
      log: (message) => logged.push(message),
    });
    expect(await publish(appended)).toBe('p1');
    expect(logged).toHaveLength(1);
  });

  it('reads each run once for all its lifecycle events, and reports the status each event moved it to', async () => {
    const sent: LifecycleMessage[] = [];
    let loads = 0;
    const publish = makePublishLifecycle({
      bus: { publish: async (m) => (sent.push(...m), m.length) },
      runs: { load: async () => (loads++, { run }) },
      log: () => undefined,
    });
    await publish(appended.slice(0, 1));
    await publish(appended.slice(1, 3));
    await publish(appended.slice(3));
    expect(loads).toBe(1);
    expect(sent.map((m) => m.detail.status)).toEqual(['queued', 'running', 'succeeded']);
    expect(sent.every((m) => m.detail.runbookId === 'hello' && m.detail.runbookVersion === 1)).toBe(true);
  });
});

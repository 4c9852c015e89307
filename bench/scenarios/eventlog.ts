import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeSequencer } from '../../shared/app/inbox-sequencer.js';
import type { RunStore } from '../../shared/app/ports/runs.js';
import type { Run } from '../../shared/domain/entities.js';
import { type EventDraft, verifyChain } from '../../shared/domain/events.js';
import { laneEvents, type LaneMark } from '../../shared/domain/inbox.js';
import { startTestDynamo } from '../../test/support/local-dynamodb.js';
import { DYNAMODB_STORAGE } from '../storage.js';
import { fixed, type Measure, type Section } from '../support.js';

/** Concurrent writers per case, and events each appends. */
const WRITERS = (process.env.CAPSTAN_BENCH_EVENTLOG_WRITERS ?? '4,16,64').split(',').map(Number);
const EVENTS_PER_WRITER = 20;

type Mode = 'head' | 'inbox';

interface EventLogCase {
  readonly writers: number;
  readonly mode: Mode;
  readonly events: number;
  readonly appended: number;
  readonly failedAppends: number;
  readonly wallMs: number;
  readonly eventsPerSecond: number;
  readonly requestsPerEvent: number;
  readonly refusedPerEvent: number;
  readonly chainIntact: boolean;
}

const runOf = (runId: string): Run => ({
  runId,
  tenantId: 'bench',
  runbookId: 'rb',
  runbookVersion: 1,
  runbookDigest: 'digest',
  status: 'running',
  inputs: {},
  priority: 'normal',
  requestedBy: 'bench',
  createdAt: new Date().toISOString(),
  updatedAt: new Date().toISOString(),
  cancelRequested: false,
});

const output = (writer: number, n: number): EventDraft => ({
  eventId: randomUUID(),
  type: 'step.output',
  timestamp: new Date().toISOString(),
  stepId: 'fan',
  targetId: `node-${writer}`,
  payload: { stream: 'stdout', text: `line ${n}`, streamSeq: n },
  meta: { workerId: `worker-${writer}` },
});

/**
 * The event log under concurrent writers, the property a large fan-out needs: N writers (a
 * fan-out's targets) append events to one run, either each on the run's head (`mutate`: one
 * conditional transaction per change, how steps without targets append) or staged in the run's
 * inbox and sequenced in batches (how a fan-out's targets append). DynamoDB Local alone, requests
 * counted at the client; the chain is verified after each case.
 */
export async function eventlogScenario(progress: (line: string) => void): Promise<Section> {
  const dataDir = DYNAMODB_STORAGE === 'disk' ? mkdtempSync(join(tmpdir(), 'capstan-bench-eventlog-')) : undefined;
  const dynamo = await startTestDynamo('bench-eventlog', dataDir);
  try {
    const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
    const { makeRunStore } = await import('../../shared/adapters/dynamodb/run-store.js');
    const requests = { sent: 0, refused: 0 };
    documentClient.middlewareStack.add(
      (next) => async (args) => {
        requests.sent++;
        try {
          return await next(args);
        } catch (error) {
          requests.refused++;
          throw error;
        }
      },
      { step: 'initialize', name: 'benchRequestCounter' },
    );
    const runs: RunStore = makeRunStore(documentClient, dynamo.tableNames);
    const cases: EventLogCase[] = [];
    for (const writers of WRITERS)
      for (const mode of ['head', 'inbox'] as const) {
        const runId = `bench-${mode}-${writers}-${randomUUID()}`;
        await runs.create(runOf(runId), [{ ...output(0, 0), type: 'run.created', payload: {} }], undefined);
        requests.sent = 0;
        requests.refused = 0;
        let failedAppends = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: writers }, async (_, w) => {
            const sequenceSoon = makeSequencer(runs);
            let mark: LaneMark | undefined;
            for (let n = 1; n <= EVENTS_PER_WRITER; n++) {
              const draft = output(w, n);
              try {
                if (mode === 'head') await runs.mutate(runId, () => ({ events: [draft] }));
                else {
                  const lane = laneEvents(`lane-${w}`, mark, [draft]);
                  await runs.stage(runId, lane.staged, []);
                  mark = lane.mark;
                  await sequenceSoon(runId);
                }
              } catch {
                failedAppends++;
              }
            }
          }),
        );
        // What a unit's completer does before the interpreter goes on: everything staged is chained.
        if (mode === 'inbox') await runs.sequence(runId);
        const wallMs = performance.now() - started;
        const log = await runs.events(runId, 0, 1_000_000);
        const appended = log.length - 1;
        const events = writers * EVENTS_PER_WRITER;
        const verdict = verifyChain(log);
        const result: EventLogCase = {
          writers,
          mode,
          events,
          appended,
          failedAppends,
          wallMs,
          eventsPerSecond: appended / (wallMs / 1000),
          requestsPerEvent: requests.sent / Math.max(1, appended),
          refusedPerEvent: requests.refused / Math.max(1, appended),
          chainIntact: verdict.valid && appended + failedAppends === events,
        };
        cases.push(result);
        progress(
          `${writers} writers, ${mode}: ${appended}/${events} appended in ${(wallMs / 1000).toFixed(1)} s, ` +
            `${fixed(result.eventsPerSecond, 1)} events/s, ${fixed(result.requestsPerEvent)} requests/event`,
        );
      }
    const measures: Measure[] = cases.map((c) => ({
      name: `${c.writers} writers, ${c.mode === 'head' ? "on the run's head" : 'through the inbox'}`,
      value: `${fixed(c.eventsPerSecond, 1)} events/s`,
      note:
        `${c.appended}/${c.events} appended${c.failedAppends > 0 ? `, ${c.failedAppends} refused as "changing too fast"` : ''}, ` +
        `${fixed(c.requestsPerEvent)} requests and ${fixed(c.refusedPerEvent)} refused per event, ` +
        `wall ${(c.wallMs / 1000).toFixed(1)} s, chain ${c.chainIntact ? 'intact' : 'BROKEN'}`,
    }));
    const failures = cases.filter((c) => !c.chainIntact).map((c) => `${c.writers} writers, ${c.mode}: chain broken`);
    return {
      title: 'Event log under concurrent writers',
      setup: `${WRITERS.join(', ')} writers each appending ${EVENTS_PER_WRITER} events to one run, on DynamoDB Local alone: each on the run's head (one conditional transaction per event, how steps without targets append) vs staged in the run's inbox and sequenced in batches (how a fan-out's targets append); requests counted at the client`,
      measures,
      data: { cases },
      ...(failures.length > 0 && { failures }),
    };
  } finally {
    await dynamo.local.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

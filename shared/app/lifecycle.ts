import { z } from 'zod';
import type { Json } from '../domain/canonical.js';
import { type Run, runSchema } from '../domain/entities.js';
import type { EventType } from '../domain/events.js';
import type { RunStatus } from '../domain/statuses.js';

/**
 * The run lifecycle events that go out on the event bus (brief, "Intake"), so a ticket system can
 * follow its ticket's run. `approval.requested` is the run waiting for approval.
 */
export const LIFECYCLE_TYPES: ReadonlySet<EventType> = new Set<EventType>([
  'run.created',
  'run.throttled',
  'run.started',
  'approval.requested',
  'run.paused',
  'run.succeeded',
  'run.failed',
  'run.cancelled',
]);

/** One appended event as the event log's stream carries it. */
export interface AppendedEvent {
  readonly runId: string;
  readonly tenantId: string;
  readonly seq: number;
  readonly type: string;
  readonly eventId: string;
  readonly timestamp: string;
  /** The event's payload: `run.created`'s names the run's runbook, ticket and trigger. */
  readonly payload?: Readonly<Record<string, Json>>;
  /** The stream position, which the mapping retries from. */
  readonly position: string;
}

/** What goes out: detail-type is the event type, `source` is `capstan`. */
export interface LifecycleMessage {
  readonly detailType: string;
  readonly detail: Readonly<Record<string, unknown>>;
}

/** The event bus; resolves how many of the messages (a prefix, in order) it accepted. */
export interface LifecycleBus {
  publish(messages: readonly LifecycleMessage[]): Promise<number>;
}

export interface LifecycleDeps {
  readonly bus: LifecycleBus;
  readonly runs: { load(runId: string): Promise<{ run: Run } | undefined> };
  readonly log: (message: string, fields: Record<string, unknown>) => void;
}

/** The run's status each lifecycle event reports: the one the event moved it to. */
const STATUS_AFTER: Readonly<Record<string, RunStatus>> = {
  'run.created': 'queued',
  'run.throttled': 'throttled',
  'run.started': 'running',
  'approval.requested': 'waiting_for_approval',
  'run.paused': 'paused',
  'run.succeeded': 'succeeded',
  'run.failed': 'failed',
  'run.cancelled': 'cancelled',
};

/** What a lifecycle message says of its run besides the event: fields a run keeps for life. */
type RunFacts = Pick<Run, 'runbookId' | 'runbookVersion' | 'ticket' | 'trigger'>;

/** The detail of one lifecycle event: the run, its ticket and trigger, and its tenant. */
export function lifecycleDetail(event: AppendedEvent, run: RunFacts | undefined): Record<string, unknown> {
  const status = STATUS_AFTER[event.type];
  return {
    eventId: event.eventId,
    type: event.type,
    runId: event.runId,
    seq: event.seq,
    tenantId: event.tenantId,
    timestamp: event.timestamp,
    ...(status !== undefined && { status }),
    ...(run && {
      runbookId: run.runbookId,
      runbookVersion: run.runbookVersion,
      ...(run.ticket && { ticket: run.ticket }),
      ...(run.trigger && { trigger: run.trigger }),
    }),
  };
}

/** The facts `run.created` carries in its payload (brief: the run's runbook, ticket and trigger). */
const createdPayloadSchema = z.object({
  runbookId: runSchema.shape.runbookId,
  runbookVersion: runSchema.shape.runbookVersion,
  ticket: runSchema.shape.ticket,
  trigger: runSchema.shape.trigger,
});

/** The run's lasting facts from its `run.created` event, when its payload has them. */
function createdFacts(event: AppendedEvent): RunFacts | undefined {
  const parsed = createdPayloadSchema.safeParse(event.payload);
  if (!parsed.success) return undefined;
  const { runbookId, runbookVersion, ticket, trigger } = parsed.data;
  return { runbookId, runbookVersion, ...(ticket && { ticket }), ...(trigger && { trigger }) };
}

/** Runs whose facts a publisher keeps: its recent runs, so most lifecycle events cost no read. */
const KNOWN_RUNS = 1000;

/**
 * Publishes the lifecycle events among appended ones, in stream order.
 * Output: the stream position to retry from when the bus refused some, else undefined.
 * The run never waits for this: it reads the log's stream after the fact, so a failing bus
 * delays the messages and never the run; the stream mapping retries from the first one not sent.
 */
export function makePublishLifecycle(deps: LifecycleDeps) {
  // A run's runbook, version, ticket and trigger never change, so one read serves all its events.
  const known = new Map<string, RunFacts>();
  const remember = (runId: string, facts: RunFacts | undefined) => {
    if (!facts) return;
    if (known.size >= KNOWN_RUNS) known.delete(known.keys().next().value ?? '');
    known.set(runId, facts);
  };
  const factsOf = async (runId: string): Promise<RunFacts | undefined> => {
    const run = (await deps.runs.load(runId))?.run;
    return (
      run && {
        runbookId: run.runbookId,
        runbookVersion: run.runbookVersion,
        ...(run.ticket && { ticket: run.ticket }),
        ...(run.trigger && { trigger: run.trigger }),
      }
    );
  };
  return async (appended: readonly AppendedEvent[]): Promise<string | undefined> => {
    // A run's first event names what the run keeps for life: its later events need no read.
    for (const event of appended) if (event.type === 'run.created') remember(event.runId, createdFacts(event));
    const wanted = appended.filter((e) => LIFECYCLE_TYPES.has(e.type as EventType));
    for (let from = 0; from < wanted.length; from += 10) {
      const chunk = wanted.slice(from, from + 10);
      let accepted = 0;
      try {
        for (const event of chunk) if (!known.has(event.runId)) remember(event.runId, await factsOf(event.runId));
        accepted = await deps.bus.publish(
          chunk.map((event) => ({ detailType: event.type, detail: lifecycleDetail(event, known.get(event.runId)) })),
        );
      } catch (error) {
        deps.log('lifecycle events not published; the stream retries them', { error: (error as Error).message });
      }
      if (accepted < chunk.length) return chunk[accepted]?.position;
    }
    return undefined;
  };
}

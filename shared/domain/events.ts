import { z } from 'zod';
import { canonicalJson, sha256Hex } from './canonical.js';

export const EVENT_TYPES = [
  'run.created',
  'run.throttled',
  'run.admitted',
  'run.ticket_claimed',
  'run.incident',
  'run.incident_acknowledged',
  'run.started',
  'run.paused',
  'run.resumed',
  'run.cancel_requested',
  'run.succeeded',
  'run.failed',
  'run.cancelled',
  'run.replayed',
  'policy.decided',
  'approval.requested',
  'approval.decision_recorded',
  'approval.resolved',
  'approval.expired',
  'approval.escalated',
  'step.dispatched',
  'step.started',
  'step.output',
  'step.succeeded',
  'step.failed',
  'step.retry_scheduled',
  'step.skipped',
  'step.halted',
  'sandbox.violation',
  'rollback.started',
  'rollback.completed',
  'artifact.stored',
] as const;
export const eventTypeSchema = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof eventTypeSchema>;

/** The `prevHash` of a run's first event. */
export const GENESIS_HASH = '0'.repeat(64);

const hashSchema = z.string().regex(/^[0-9a-f]{64}$/);

/** The event envelope (brief: "Event envelope"): one per state change, per run, gap-free. */
export const runEventSchema = z.strictObject({
  eventId: z.string().min(1),
  type: eventTypeSchema,
  runId: z.string().min(1),
  seq: z.number().int().positive(),
  tenantId: z.string().min(1),
  timestamp: z.iso.datetime(),
  stepId: z.string().optional(),
  targetId: z.string().optional(),
  payload: z.record(z.string(), z.json()),
  meta: z.strictObject({
    workerId: z.string().optional(),
    sandboxProfile: z.string().optional(),
    correlationId: z.string().optional(),
  }),
  prevHash: hashSchema,
  hash: hashSchema,
});
export type RunEvent = z.infer<typeof runEventSchema>;

/** What a use case says happened; the log gives it its place in the chain. */
export type EventDraft = Omit<RunEvent, 'seq' | 'prevHash' | 'hash' | 'runId' | 'tenantId'>;

/** The head of a run's chain: the last seq and hash appended. */
export interface ChainHead {
  readonly seq: number;
  readonly hash: string;
}

/** A chain head that came from outside (a command, the interpreter's state). */
export const chainHeadSchema = z.strictObject({ seq: z.number().int().min(0), hash: z.string().min(1) });

export const EMPTY_CHAIN: ChainHead = { seq: 0, hash: GENESIS_HASH };

/** `sha256(prevHash + canonical(event without hash))`. */
export function eventHash(event: Omit<RunEvent, 'hash'>): string {
  return sha256Hex(event.prevHash + canonicalJson(event));
}

/**
 * Appends drafts after `head`: each gets the next seq, the previous hash and its own hash.
 * Returns the chained events and the new head.
 */
export function chainEvents(
  head: ChainHead,
  run: { readonly runId: string; readonly tenantId: string },
  drafts: readonly EventDraft[],
): { events: RunEvent[]; head: ChainHead } {
  let current = head;
  const events = drafts.map((draft) => {
    const unhashed = {
      ...draft,
      runId: run.runId,
      tenantId: run.tenantId,
      seq: current.seq + 1,
      prevHash: current.hash,
    };
    const event: RunEvent = { ...unhashed, hash: eventHash(unhashed) };
    current = { seq: event.seq, hash: event.hash };
    return event;
  });
  return { events, head: current };
}

export type ChainVerdict =
  | { readonly valid: true; readonly count: number; readonly head: ChainHead }
  | { readonly valid: false; readonly index: number; readonly seq: number; readonly reason: string };

/**
 * Verifies a run's events from its first (or from `start`): contiguous seqs, each `prevHash`
 * equal to the previous hash, each hash recomputed. Reports the first broken link.
 */
export function verifyChain(events: readonly RunEvent[], start: ChainHead = EMPTY_CHAIN): ChainVerdict {
  let head = start;
  for (const [index, event] of events.entries()) {
    const broken = (reason: string): ChainVerdict => ({ valid: false, index, seq: event.seq, reason });
    if (event.seq !== head.seq + 1) return broken(`expected seq ${head.seq + 1}, found ${event.seq}`);
    if (event.prevHash !== head.hash) return broken(`prevHash does not match the hash of seq ${head.seq}`);
    const { hash, ...unhashed } = event;
    if (eventHash(unhashed) !== hash) return broken('hash does not match the event content');
    head = { seq: event.seq, hash };
  }
  return { valid: true, count: events.length, head };
}

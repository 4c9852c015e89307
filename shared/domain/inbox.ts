import type { EventDraft } from './events.js';

/**
 * A run's inbox: events staged by writers that would otherwise contend on the run's chain head (a
 * fan-out's targets), each committed in the same transaction as the state it describes, waiting
 * for its place in the chain. A lane is one step execution: its events are written one after the
 * other by the worker holding its lease, and enter the chain in that order; events of different
 * lanes are concurrent, so the chain may interleave them.
 */
export interface StagedEvent {
  /** The step execution that staged it. */
  readonly lane: string;
  /** Its place in the lane, from 1. */
  readonly laneSeq: number;
  /** When it was staged; never earlier than the lane's previous event. */
  readonly at: string;
  readonly event: EventDraft;
}

/** Events moved into the chain per transaction: with the head and one delete each, under DynamoDB's 100 items. */
export const SEQUENCE_BATCH = 45;

/** The key that orders an inbox: by time, then lane, then place in the lane. */
export const inboxOrderKey = (s: Pick<StagedEvent, 'at' | 'lane' | 'laneSeq'>): string =>
  `${s.at}#${s.lane}#${String(s.laneSeq).padStart(8, '0')}`;

/**
 * The order a batch of staged events enters the chain: by time, with each lane's own events kept
 * in lane order even if a clock made a later one look earlier.
 */
export function chainOrder<T extends StagedEvent>(batch: readonly T[]): T[] {
  const byTime = [...batch].sort((a, b) => inboxOrderKey(a).localeCompare(inboxOrderKey(b)));
  const lanes = new Map<string, T[]>();
  for (const staged of byTime) lanes.set(staged.lane, [...(lanes.get(staged.lane) ?? []), staged]);
  for (const list of lanes.values()) list.sort((a, b) => a.laneSeq - b.laneSeq);
  const taken = new Map<string, number>();
  return byTime.map((staged) => {
    const index = taken.get(staged.lane) ?? 0;
    taken.set(staged.lane, index + 1);
    return lanes.get(staged.lane)?.[index] ?? staged;
  });
}

/** Where a lane stands: how many events it staged and when the last one was. */
export interface LaneMark {
  readonly staged: number;
  readonly at: string;
}

/** Stages `events` after `mark` in their lane: each gets the next place and a time that never goes back. */
export function laneEvents(
  lane: string,
  mark: LaneMark | undefined,
  events: readonly EventDraft[],
): { staged: StagedEvent[]; mark: LaneMark } {
  let seq = mark?.staged ?? 0;
  let at = mark?.at ?? '';
  const staged = events.map((event) => {
    seq += 1;
    at = event.timestamp > at ? event.timestamp : at;
    return { lane, laneSeq: seq, at, event };
  });
  return { staged, mark: { staged: seq, at } };
}

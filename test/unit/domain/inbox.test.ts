import { describe, expect, it } from 'vitest';
import type { EventDraft } from '../../../shared/domain/events.js';
import { chainOrder, inboxOrderKey, laneEvents } from '../../../shared/domain/inbox.js';

const draft = (timestamp: string, text: string): EventDraft => ({
  eventId: text,
  type: 'step.output',
  timestamp,
  payload: { text },
  meta: {},
});

describe('a run inbox', () => {
  it('gives a lane its places in order and a time that never goes back', () => {
    const first = laneEvents('lane', undefined, [
      draft('2026-01-01T00:00:02Z', 'a'),
      draft('2026-01-01T00:00:01Z', 'b'),
    ]);
    expect(first.staged.map((s) => [s.laneSeq, s.at])).toEqual([
      [1, '2026-01-01T00:00:02Z'],
      [2, '2026-01-01T00:00:02Z'],
    ]);
    const next = laneEvents('lane', first.mark, [draft('2026-01-01T00:00:03Z', 'c')]);
    expect(next.staged.map((s) => s.laneSeq)).toEqual([3]);
    expect(next.mark).toEqual({ staged: 3, at: '2026-01-01T00:00:03Z' });
    // The inbox's order key sorts a lane's events in lane order even at the same time.
    const keys = [...first.staged, ...next.staged].map(inboxOrderKey);
    expect([...keys].sort()).toEqual(keys);
  });

  it('orders a batch by time, keeping each lane in its own order', () => {
    const staged = [
      { lane: 'b', laneSeq: 2, at: '2026-01-01T00:00:01Z', event: draft('2026-01-01T00:00:01Z', 'b2') },
      { lane: 'a', laneSeq: 1, at: '2026-01-01T00:00:02Z', event: draft('2026-01-01T00:00:02Z', 'a1') },
      { lane: 'b', laneSeq: 1, at: '2026-01-01T00:00:03Z', event: draft('2026-01-01T00:00:03Z', 'b1') },
    ];
    expect(chainOrder(staged).map((s) => s.event.eventId)).toEqual(['b1', 'a1', 'b2']);
  });
});

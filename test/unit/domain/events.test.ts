import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../shared/domain/canonical.js';
import {
  chainEvents,
  EMPTY_CHAIN,
  type EventDraft,
  GENESIS_HASH,
  runEventSchema,
  verifyChain,
} from '../../../shared/domain/events.js';

const run = { runId: 'run-1', tenantId: 'acme' };

function draft(n: number): EventDraft {
  return {
    eventId: `evt-${n}`,
    type: n === 1 ? 'run.created' : 'step.output',
    timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
    payload: { n, text: `line ${n}` },
    meta: { correlationId: 'c-1' },
  };
}

describe('canonicalJson', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } })).toBe(
      '{"a":{"d":[1,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('gives the same text for equal values built in different orders', () => {
    expect(canonicalJson({ x: 1, y: [true, null] })).toBe(canonicalJson({ y: [true, null], x: 1 }));
  });

  it('refuses values JSON cannot hold', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson({ f: () => 1 })).toThrow(TypeError);
  });
});

describe('the event hash chain', () => {
  const { events, head } = chainEvents(EMPTY_CHAIN, run, [draft(1), draft(2), draft(3)]);

  it('numbers events from 1 without gaps and links each to the previous hash', () => {
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(events[0]?.prevHash).toBe(GENESIS_HASH);
    expect(events[1]?.prevHash).toBe(events[0]?.hash);
    expect(head).toEqual({ seq: 3, hash: events[2]?.hash });
    for (const event of events) expect(runEventSchema.parse(event)).toEqual(event);
  });

  it('continues a chain from its head', () => {
    const more = chainEvents(head, run, [draft(4)]);
    expect(verifyChain([...events, ...more.events])).toMatchObject({ valid: true, count: 4 });
  });

  it('verifies an untouched chain', () => {
    expect(verifyChain(events)).toEqual({ valid: true, count: 3, head });
  });

  it('reports the first event whose content was changed', () => {
    const tampered = events.map((e) => (e.seq === 2 ? { ...e, payload: { n: 2, text: 'edited' } } : e));
    expect(verifyChain(tampered)).toMatchObject({
      valid: false,
      index: 1,
      seq: 2,
      reason: expect.stringMatching(/content/),
    });
  });

  it('reports a missing event as a gap', () => {
    expect(verifyChain([events[0], events[2]].filter((e) => e !== undefined))).toMatchObject({
      valid: false,
      seq: 3,
      reason: expect.stringMatching(/expected seq 2/),
    });
  });

  it('reports a forged event re-hashed in place: its successor no longer links to it', () => {
    const forged = chainEvents(EMPTY_CHAIN, run, [draft(1), { ...draft(2), payload: { forged: true } }]).events[1];
    if (!forged) throw new Error('chain too short');
    const spliced = events.map((e) => (e.seq === 2 ? forged : e));
    expect(verifyChain(spliced)).toMatchObject({
      valid: false,
      seq: 3,
      reason: expect.stringMatching(/prevHash/),
    });
  });
});

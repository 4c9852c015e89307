import { describe, expect, it } from 'vitest';
import { makeRedactor, parsePatterns, REDACTED, redactJson } from '../../../shared/domain/redaction.js';
import { livenessOf } from '../../../shared/domain/workers.js';

describe('redaction', () => {
  it('replaces secret values, longest first, and known credential shapes', () => {
    const redact = makeRedactor(['hunter22', 'hunter22-extended', 'abc']);
    expect(redact('pw=hunter22-extended and hunter22')).toBe(`pw=${REDACTED} and ${REDACTED}`);
    expect(redact('abc stays: too short to be told from a word')).toContain('abc');
    expect(redact('key AKIAABCDEFGHIJKLMNOP')).toBe(`key ${REDACTED}`);
  });

  it('redacts every string in a JSON value and takes configured patterns', () => {
    const redact = makeRedactor([], parsePatterns('["tok_[a-z0-9]+"]'));
    expect(redactJson({ a: ['tok_abc123', 1], b: { c: 'x tok_z9' } }, redact)).toEqual({
      a: [REDACTED, 1],
      b: { c: `x ${REDACTED}` },
    });
    expect(() => parsePatterns('{"not":"a list"}')).toThrow(/JSON array/);
  });
});

describe('worker liveness', () => {
  const at = (iso: string) => new Date(iso);
  const worker = { status: 'busy' as const, lastHeartbeatAt: '2026-01-01T00:00:00.000Z' };

  it('shows the reported status until three heartbeats are missed, then offline', () => {
    expect(livenessOf(worker, at('2026-01-01T00:00:40.000Z'), 15_000).status).toBe('busy');
    expect(livenessOf(worker, at('2026-01-01T00:00:46.000Z'), 15_000)).toMatchObject({
      status: 'offline',
      missedBeats: 3,
    });
    expect(livenessOf({ ...worker, status: 'dead' }, at('2026-01-01T00:00:01.000Z'), 15_000).status).toBe('dead');
  });
});

import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../../shared/adapters/dynamodb/cursor.js';
import { ValidationError } from '../../../shared/domain/errors.js';

const scope = (tenant: string) => ({ keys: ['pk', 'sk', 'gsi1sk'], bound: { gsi1pk: `TENANT#${tenant}#RUNS` } });
const key = { pk: 'RUN#1', sk: 'META', gsi1pk: 'TENANT#a#RUNS', gsi1sk: '2024#run-1' };

describe('list cursors', () => {
  it('round-trips a page boundary within its own query', () => {
    expect(decodeCursor(encodeCursor(key, scope('a')), scope('a'))).toEqual(key);
  });

  it("puts the query's own partition back, so another tenant's cursor cannot leave its partition", () => {
    const theirs = encodeCursor(key, scope('a'));
    expect(decodeCursor(theirs, scope('b'))?.gsi1pk).toBe('TENANT#b#RUNS');
  });

  it.each([
    ['a partition in the cursor', Buffer.from(JSON.stringify(key)).toString('base64url')],
    ['a missing key', Buffer.from(JSON.stringify({ pk: 'x', sk: 'y' })).toString('base64url')],
    ['a number for a key', Buffer.from(JSON.stringify({ pk: 1, sk: 'y', gsi1sk: 'z' })).toString('base64url')],
    ['an empty key', Buffer.from(JSON.stringify({ pk: '', sk: 'y', gsi1sk: 'z' })).toString('base64url')],
    ['text that is not base64url', '%%%'],
    ['an oversized cursor', 'A'.repeat(5000)],
  ])('refuses %s with a 400 naming the cursor', (_label, cursor) => {
    expect(() => decodeCursor(cursor, scope('a'))).toThrow(ValidationError);
  });
});

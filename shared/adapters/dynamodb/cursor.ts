import { z } from 'zod';
import { ValidationError } from '../../domain/errors.js';

/**
 * How a list query pages: the key attributes a page boundary has, and the attributes the query
 * itself fixes (its partition, which names the tenant). The fixed ones never travel in the
 * cursor: they are put back from the query, so a cursor cannot point into another tenant's or
 * another query's partition, whatever its text says.
 */
export interface CursorScope {
  readonly keys: readonly string[];
  readonly bound: Readonly<Record<string, string>>;
}

const MAX_CURSOR_CHARS = 4096;
/** A key attribute value: a non-empty string well inside DynamoDB's 1,024-byte sort key limit. */
const keyValueSchema = z.string().min(1).max(1024);

const invalid = () =>
  new ValidationError('the cursor is not valid', [{ path: 'cursor', message: 'not a cursor returned by this API' }]);

/** An opaque page cursor for a DynamoDB LastEvaluatedKey, without the attributes the query fixes. */
export function encodeCursor(key: Record<string, unknown> | undefined, scope: CursorScope): string | undefined {
  if (!key) return undefined;
  const travelling = Object.fromEntries(scope.keys.map((name) => [name, key[name]]));
  return Buffer.from(JSON.stringify(travelling), 'utf8').toString('base64url');
}

/**
 * Reads a cursor back into an ExclusiveStartKey for the query `scope` describes. A cursor with
 * other attributes, values that are not key strings, or text that is not a cursor is a 400.
 */
export function decodeCursor(cursor: string | undefined, scope: CursorScope): Record<string, string> | undefined {
  if (cursor === undefined) return undefined;
  if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  const schema = z.strictObject(Object.fromEntries(scope.keys.map((name) => [name, keyValueSchema])));
  let parsed: Record<string, string>;
  try {
    parsed = schema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))) as Record<string, string>;
  } catch {
    throw invalid();
  }
  return { ...parsed, ...scope.bound };
}

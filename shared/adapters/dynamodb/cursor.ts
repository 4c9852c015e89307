import { z } from 'zod';
import { ValidationError } from '../../domain/errors.js';

const keySchema = z.record(z.string(), z.union([z.string(), z.number()]));

/** An opaque page cursor for a DynamoDB LastEvaluatedKey. */
export function encodeCursor(key: Record<string, unknown> | undefined): string | undefined {
  return key ? Buffer.from(JSON.stringify(key), 'utf8').toString('base64url') : undefined;
}

/** Reads a cursor back; a cursor that was not made by {@link encodeCursor} is a 400, not a 500. */
export function decodeCursor(cursor: string | undefined): Record<string, string | number> | undefined {
  if (cursor === undefined) return undefined;
  try {
    return keySchema.parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    throw new ValidationError('the cursor is not valid', [
      { path: 'cursor', message: 'not a cursor returned by this API' },
    ]);
  }
}

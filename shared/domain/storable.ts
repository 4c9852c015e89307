import { z } from 'zod';
import type { Json } from './canonical.js';
import type { PathSegment, RawIssue } from './zod-issues.js';

/**
 * What every user-supplied JSON value that Capstan stores or queues must satisfy: DynamoDB can
 * store it (32 levels of nesting per item, numbers of 38 digits between 1E-130 and 9.99E+125,
 * items of 400 KB) and SQS can carry it (only the characters #x9 #xA #xD #x20-#xD7FF
 * #xE000-#xFFFD #x10000-#x10FFFF).
 */

/**
 * Levels a user value may nest. DynamoDB allows 32 per item, and a value sits at most eight
 * levels down (a rollback's params in a stored runbook), so 20 leaves room.
 */
export const MAX_JSON_DEPTH = 20;
/** Run inputs, as UTF-8 JSON: a run, its `run.created` event and each command carry them. */
export const MAX_INPUTS_BYTES = 64 * 1024;
/** A runbook in its normal form, as UTF-8 JSON: one DynamoDB item of at most 400 KB holds it. */
export const MAX_RUNBOOK_BYTES = 256 * 1024;

/** The smallest and largest magnitudes DynamoDB stores. */
const MIN_MAGNITUDE = 1e-130;
const MAX_MAGNITUDE = 9.99e125;

/** A character SQS refuses: C0 controls other than tab/LF/CR, U+FFFE, U+FFFF or a lone surrogate. */
const UNCARRIABLE =
  // eslint-disable-next-line no-control-regex -- the control characters are exactly what is refused
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The first character of `text` no queue can carry, as `U+XXXX`, or undefined when it has none. */
export function uncarriableCharacter(text: string): string | undefined {
  const found = UNCARRIABLE.exec(text);
  if (!found) return undefined;
  return `U+${(found[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}

function numberProblem(value: number): string | undefined {
  if (!Number.isFinite(value)) return 'must be a finite number';
  if (Number.isInteger(value)) {
    return Number.isSafeInteger(value)
      ? undefined
      : 'is an integer beyond ±9007199254740991, which JSON numbers cannot carry exactly';
  }
  const magnitude = Math.abs(value);
  if (magnitude < MIN_MAGNITUDE || magnitude > MAX_MAGNITUDE) {
    return 'is outside the range a stored number may have (1E-130 to 9.99E+125)';
  }
  return undefined;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * Every reason `value` cannot be stored and queued, with its path (at most `limit` issues).
 * Iterative, so a value nested thousands of levels deep is reported, not a stack overflow.
 */
export function storableJsonIssues(value: unknown, path: readonly PathSegment[] = [], limit = 20): RawIssue[] {
  const issues: RawIssue[] = [];
  const pending: Array<{ value: unknown; path: readonly PathSegment[]; depth: number }> = [{ value, path, depth: 0 }];
  while (pending.length > 0 && issues.length < limit) {
    const item = pending.pop();
    if (!item) break;
    const at = item.path;
    const current = item.value;
    if (current === null || typeof current === 'boolean') continue;
    if (typeof current === 'number') {
      const problem = numberProblem(current);
      if (problem) issues.push({ path: at, message: problem });
      continue;
    }
    if (typeof current === 'string') {
      const bad = uncarriableCharacter(current);
      if (bad) issues.push({ path: at, message: `contains ${bad}, a character no queue can carry` });
      continue;
    }
    if (typeof current !== 'object') {
      issues.push({ path: at, message: `a ${typeof current} is not JSON` });
      continue;
    }
    if (item.depth >= MAX_JSON_DEPTH) {
      issues.push({ path: at, message: `nests deeper than ${MAX_JSON_DEPTH} levels` });
      continue;
    }
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i -= 1) {
        pending.push({ value: current[i] as unknown, path: [...at, i], depth: item.depth + 1 });
      }
      continue;
    }
    if (!isPlainObject(current)) {
      issues.push({ path: at, message: 'is not a JSON object' });
      continue;
    }
    const entries = Object.entries(current);
    for (let i = entries.length - 1; i >= 0; i -= 1) {
      const [key, child] = entries[i] as [string, unknown];
      const keyPath = [...at, key];
      if (key === '') issues.push({ path: keyPath, message: 'an object key cannot be empty' });
      else if (key === '__proto__') issues.push({ path: keyPath, message: "'__proto__' is not allowed as a key" });
      else if (uncarriableCharacter(key)) {
        issues.push({
          path: at,
          message: `a key contains ${uncarriableCharacter(key)}, a character no queue can carry`,
        });
      } else pending.push({ value: child, path: keyPath, depth: item.depth + 1 });
    }
  }
  return issues;
}

/** UTF-8 bytes of the value's JSON text. */
export function jsonBytes(value: Json): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** True when `value` nests deeper than `maxDepth` containers; iterative, stops at the first one too deep. */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (pending.length > 0) {
    const item = pending.pop();
    if (!item || item.value === null || typeof item.value !== 'object') continue;
    if (item.depth >= maxDepth) return true;
    for (const child of Object.values(item.value)) pending.push({ value: child as unknown, depth: item.depth + 1 });
  }
  return false;
}

function addIssues(ctx: z.RefinementCtx, issues: readonly RawIssue[]): void {
  for (const issue of issues) ctx.addIssue({ code: 'custom', message: issue.message, path: [...issue.path] });
}

/**
 * A JSON value Capstan can store and queue (see {@link storableJsonIssues}); at most `maxBytes`
 * of JSON text when given. The one schema for every user-supplied JSON value that is kept.
 */
export function storableJson(maxBytes?: number): z.ZodType<Json> {
  return z.unknown().transform((value, ctx): Json => {
    if (value === undefined) {
      ctx.addIssue({ code: 'custom', message: 'a JSON value is required' });
      return z.NEVER;
    }
    const issues = storableJsonIssues(value);
    if (issues.length > 0) {
      addIssues(ctx, issues);
      return z.NEVER;
    }
    const json = value as Json;
    if (maxBytes !== undefined && jsonBytes(json) > maxBytes) {
      ctx.addIssue({ code: 'custom', message: `is ${jsonBytes(json)} bytes of JSON; at most ${maxBytes} are allowed` });
      return z.NEVER;
    }
    return json;
  });
}

/** A JSON object Capstan can store and queue, keyed by name (params, inputs). */
export function storableJsonObject(maxBytes?: number): z.ZodType<Record<string, Json>> {
  return storableJson(maxBytes).transform((value, ctx): Record<string, Json> => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
      return z.NEVER;
    }
    return value;
  });
}

/** Text Capstan can store and queue: every character one SQS carries. */
export const storableTextSchema = z.string().superRefine((value, ctx) => {
  const bad = uncarriableCharacter(value);
  if (bad) ctx.addIssue({ code: 'custom', message: `contains ${bad}, a character no queue can carry` });
});

import type { z } from 'zod';
import type { Issue } from './errors.js';

/** A path into a document, as keys and indexes. */
export type PathSegment = string | number;

/** An issue whose path is still structured, so a parser can look up its line. */
export interface RawIssue {
  readonly path: readonly PathSegment[];
  readonly message: string;
}

/** Formats a path as `phases[0].steps[2].timeout`. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? key : `.${key}`;
  }
  return out || '(root)';
}

/** Flattens a zod error into raw issues; each unknown key becomes its own issue at its own path. */
export function rawIssuesFromZod(error: z.ZodError, prefix: readonly PathSegment[] = []): RawIssue[] {
  return error.issues.flatMap((issue): RawIssue[] => {
    const path = [...prefix, ...issue.path.map((k) => (typeof k === 'number' ? k : String(k)))];
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...path, key], message: `unknown field '${key}'` }));
    }
    return [{ path, message: issue.message }];
  });
}

/** Turns raw issues into the issues an API answer carries. */
export function formatIssues(issues: readonly RawIssue[]): Issue[] {
  return issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message }));
}

/** Flattens a zod error into formatted issues. */
export function issuesFromZod(error: z.ZodError, prefix: readonly PathSegment[] = []): Issue[] {
  return formatIssues(rawIssuesFromZod(error, prefix));
}

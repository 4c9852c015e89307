/**
 * The local Step Functions endpoint's data file: one JSON line per change of an execution, the
 * last line of an execution winning, so saving a change costs the same however many executions
 * the file holds; rewritten with each execution's last state at start-up.
 */

import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { z } from 'zod';

export const executionStatus = z.enum(['RUNNING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED']);
export type ExecutionStatus = z.infer<typeof executionStatus>;

export const executionRecord = z.object({
  executionArn: z.string(),
  name: z.string(),
  status: executionStatus,
  input: z.string(),
  startDate: z.number(),
  stopDate: z.number().optional(),
  output: z.string().optional(),
  error: z.string().optional(),
  cause: z.string().optional(),
});
export type ExecutionRecord = z.infer<typeof executionRecord>;

/** Appends an execution's new state. */
export function appendExecution(file: string, record: ExecutionRecord): void {
  appendFileSync(file, `${JSON.stringify(record)}\n`);
}

/** Rewrites the file with each execution's last state (at start-up, so lines stay few). */
export function compactExecutions(file: string, records: Iterable<ExecutionRecord>): void {
  mkdirSync(dirname(file), { recursive: true });
  const lines = [...records].map((record) => `${JSON.stringify(record)}\n`).join('');
  // Write then rename, so a crash never leaves half a file.
  writeFileSync(`${file}.tmp`, lines);
  renameSync(`${file}.tmp`, file);
}

/**
 * The executions a data file holds: JSON lines, the last line of an execution winning. A last
 * line cut short by a crash in the middle of its write is skipped; a bad line anywhere else is an
 * error. A file that is one JSON array is read as the older form.
 */
export function readExecutions(file: string, log?: (line: string) => void): ExecutionRecord[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  if (text.trimStart().startsWith('[')) return z.array(executionRecord).parse(JSON.parse(text));
  const byArn = new Map<string, ExecutionRecord>();
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (error) {
      // Every whole write ends with a newline: a last line without one was cut short.
      if (i === lines.length - 1) {
        log?.(`step functions: ${file}: skipped line ${i + 1}, cut short by a crash`);
        return;
      }
      throw new Error(`${file}: line ${i + 1} is not JSON: ${(error as Error).message}`);
    }
    const record = executionRecord.safeParse(parsed);
    if (!record.success) throw new Error(`${file}: line ${i + 1} is not an execution: ${record.error.message}`);
    byArn.set(record.data.executionArn, record.data);
  });
  return [...byArn.values()];
}

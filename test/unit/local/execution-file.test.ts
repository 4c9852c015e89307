import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readExecutions } from '../../../local/execution-file.js';

const ARN = 'arn:aws:states:us-east-1:000000000000:execution:capstan:';
const record = (name: string, status: string, more: object = {}) => ({
  executionArn: `${ARN}${name}`,
  name,
  status,
  input: '{}',
  startDate: 1,
  ...more,
});
const line = (value: object) => `${JSON.stringify(value)}\n`;

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'capstan-sfn-file-'));
  file = join(dir, 'executions.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the local Step Functions data file', () => {
  it('holds nothing when it does not exist', () => {
    expect(readExecutions(file)).toEqual([]);
  });

  it('keeps the last line of each execution', () => {
    writeFileSync(file, line(record('a', 'RUNNING')) + line(record('b', 'RUNNING')));
    appendFileSync(file, line(record('a', 'SUCCEEDED', { stopDate: 2, output: 'null' })));
    expect(readExecutions(file)).toEqual([
      record('a', 'SUCCEEDED', { stopDate: 2, output: 'null' }),
      record('b', 'RUNNING'),
    ]);
  });

  it('skips a last line a crash cut short, and refuses a bad line anywhere else', () => {
    writeFileSync(file, line(record('a', 'RUNNING')) + line(record('a', 'FAILED')).slice(0, 30));
    expect(readExecutions(file)).toEqual([record('a', 'RUNNING')]);
    writeFileSync(file, `${line(record('a', 'RUNNING')).slice(0, 30)}\n${line(record('b', 'RUNNING'))}`);
    expect(() => readExecutions(file)).toThrow(/line 1 is not JSON/);
    writeFileSync(file, line(record('a', 'RUNNING')) + line({ name: 'b' }));
    expect(() => readExecutions(file)).toThrow(/line 2 is not an execution/);
  });

  it('reads the older form, one JSON array', () => {
    writeFileSync(file, JSON.stringify([record('a', 'RUNNING'), record('b', 'ABORTED')]));
    expect(readExecutions(file)).toEqual([record('a', 'RUNNING'), record('b', 'ABORTED')]);
  });
});

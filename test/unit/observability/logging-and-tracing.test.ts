import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { holdSecrets, makeLogger, releaseSecrets } from '../../../shared/observability/logger.js';
import { fileSpanSink } from '../../../shared/observability/span-sinks.js';
import {
  configureTracing,
  currentTraceHeader,
  parseTraceHeader,
  type SpanRecord,
  withSpan,
} from '../../../shared/observability/tracing.js';
import { invocationContext } from '../../../functions/observability.js';

let lines: string[];

beforeEach(() => {
  lines = [];
  for (const stream of [process.stdout, process.stderr])
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('log redaction', () => {
  it('masks a held secret and an access key inside a logged error, its message and its stack', () => {
    const logger = makeLogger('test-redaction');
    holdSecrets(['hunter2-database-password']);
    try {
      logger.error('connecting failed for hunter2-database-password', {
        error: new Error('login refused for AKIAABCDEFGHIJKLMNOP with hunter2-database-password'),
      });
    } finally {
      releaseSecrets(['hunter2-database-password']);
    }
    const output = lines.join('');
    expect(output).not.toContain('hunter2-database-password');
    expect(output).not.toContain('AKIAABCDEFGHIJKLMNOP');
    expect(output).toContain('[REDACTED]');
    expect(output).toContain('login refused for');
  });

  it('stops masking a secret once it is released', () => {
    const logger = makeLogger('test-redaction');
    holdSecrets(['temporary-value-1234']);
    releaseSecrets(['temporary-value-1234']);
    logger.error('value temporary-value-1234');
    expect(lines.join('')).toContain('temporary-value-1234');
  });

  it('keeps masking a secret two steps hold until the second lets it go', () => {
    const logger = makeLogger('test-redaction');
    holdSecrets(['shared-value-5678']);
    holdSecrets(['shared-value-5678']);
    releaseSecrets(['shared-value-5678']);
    logger.error('first: shared-value-5678');
    expect(lines.join('')).not.toContain('shared-value-5678');
    releaseSecrets(['shared-value-5678']);
    logger.error('second: shared-value-5678');
    expect(lines.join('')).toContain('second: shared-value-5678');
  });
});

describe('invocation context', () => {
  it('takes the run, tenant and approval of a task input and its decision', () => {
    expect(
      invocationContext({
        runId: 'r1',
        tenantId: 't1',
        decision: { action: 'await_approval', approvalId: 'a1', stepId: 's1' },
      }),
    ).toEqual({ runId: 'r1', tenantId: 't1', approvalId: 'a1', stepId: 's1' });
  });

  it('takes the run of a REST path and the tenant the authorizer passed', () => {
    expect(
      invocationContext({
        resource: '/v1/runs/{id}/approvals/{approvalId}',
        pathParameters: { id: 'r2', approvalId: 'a2' },
        requestContext: { authorizer: { tenantId: 't2' } },
      }),
    ).toEqual({ runId: 'r2', approvalId: 'a2', tenantId: 't2' });
  });
});

describe('tracing', () => {
  it('continues a trace from a header: the child names the sender span as its parent', async () => {
    const spans: SpanRecord[] = [];
    configureTracing({ sink: (span) => spans.push(span), service: 'test' });
    let header: string | undefined;
    await withSpan('Dispatch', {}, async () => {
      header = currentTraceHeader();
    });
    await withSpan('step.execute', { parentHeader: header }, async () => undefined);
    const [dispatch, step] = spans;
    expect(step?.traceId).toBe(dispatch?.traceId);
    expect(step?.parentId).toBe(dispatch?.spanId);
  });

  it('nests spans inside the active span and records a failure', async () => {
    const spans: SpanRecord[] = [];
    configureTracing({ sink: (span) => spans.push(span), service: 'test' });
    await expect(
      withSpan('outer', {}, () => withSpan('inner', {}, () => Promise.reject(new TypeError('boom')))),
    ).rejects.toThrow('boom');
    const inner = spans.find((s) => s.name === 'inner');
    const outer = spans.find((s) => s.name === 'outer');
    expect(inner?.parentId).toBe(outer?.spanId);
    expect(inner?.error).toBe('TypeError');
  });

  it('ignores a malformed header and starts a new trace', () => {
    expect(parseTraceHeader('Root=nonsense;Parent=1')).toBeUndefined();
    expect(parseTraceHeader(undefined)).toBeUndefined();
  });

  it('appends spans as JSON lines to a file', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'capstan-spans-')), 'traces.jsonl');
    configureTracing({ sink: fileSpanSink(file), service: 'test' });
    await withSpan('worker.assign', { attributes: { runId: 'r1' } }, async () => undefined);
    const [line] = readFileSync(file, 'utf8').trim().split('\n');
    expect(JSON.parse(line ?? '{}')).toMatchObject({ name: 'worker.assign', attributes: { runId: 'r1' } });
  });
});

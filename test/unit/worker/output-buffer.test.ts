import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type OutputChunk, OutputBuffer } from '../../../worker-container/output-buffer.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

function buffer(more: { capBytes?: number; failFirst?: boolean } = {}) {
  const batches: OutputChunk[][] = [];
  const errors: string[] = [];
  let failures = more.failFirst ? 1 : 0;
  const output = new OutputBuffer({
    record: async (batch) => {
      if (failures-- > 0) throw new Error('throttled');
      batches.push(batch);
    },
    redact: (text) => text.replaceAll('hunter2', '[REDACTED]'),
    flushMs: 250,
    ...(more.capBytes !== undefined && { capBytes: more.capBytes }),
    onError: (error) => errors.push(error.message),
  });
  return { output, batches, errors };
}

describe('the output buffer', () => {
  it('records the lines pushed within one flush interval as one batch, numbered in order', async () => {
    const { output, batches } = buffer();
    output.push('stdout', 'one');
    output.push('stderr', 'two');
    await vi.advanceTimersByTimeAsync(249);
    expect(batches).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    output.push('stdout', 'three');
    await vi.advanceTimersByTimeAsync(250);
    expect(batches).toEqual([
      [
        { stream: 'stdout', text: 'one', streamSeq: 1 },
        { stream: 'stderr', text: 'two', streamSeq: 2 },
      ],
      [{ stream: 'stdout', text: 'three', streamSeq: 3 }],
    ]);
    await output.close();
  });

  it('records nothing for an interval without output, and what is left on close', async () => {
    const { output, batches } = buffer();
    await vi.advanceTimersByTimeAsync(1000);
    expect(batches).toEqual([]);
    output.push('stdout', 'last');
    await output.close();
    expect(batches).toEqual([[{ stream: 'stdout', text: 'last', streamSeq: 1 }]]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(batches).toHaveLength(1);
  });

  it('redacts each line before it is kept and counted', async () => {
    const { output, batches } = buffer();
    output.push('stdout', 'password=hunter2');
    await output.close();
    expect(batches[0]?.[0]?.text).toBe('password=[REDACTED]');
  });

  it('cuts the output with one marker once the cap is passed, and keeps nothing after it', async () => {
    const { output, batches } = buffer({ capBytes: 10 });
    output.push('stdout', '12345');
    output.push('stdout', '67890');
    output.push('stdout', 'x');
    output.push('stdout', 'never kept');
    await output.close();
    expect(batches.flat()).toEqual([
      { stream: 'stdout', text: '12345', streamSeq: 1 },
      { stream: 'stdout', text: '67890', streamSeq: 2 },
      { stream: 'stderr', text: '[output truncated after 10 bytes]', streamSeq: 3 },
    ]);
  });

  it('reports a batch it could not record and goes on with the next', async () => {
    const { output, batches, errors } = buffer({ failFirst: true });
    output.push('stdout', 'lost');
    await vi.advanceTimersByTimeAsync(250);
    output.push('stdout', 'kept');
    await output.close();
    expect(errors).toEqual(['throttled']);
    expect(batches).toEqual([[{ stream: 'stdout', text: 'kept', streamSeq: 2 }]]);
  });
});

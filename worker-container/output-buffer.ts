import type { OutputLine } from '../shared/app/step-results.js';

/** One line of a step's output, numbered per step execution. */
export type OutputChunk = OutputLine;

export interface OutputBufferOptions {
  /** Records one batch (as one `step.output` event); batches are recorded in order. */
  readonly record: (batch: OutputChunk[]) => Promise<void>;
  /** Redacts a line before it is counted and kept. */
  readonly redact: (text: string) => string;
  /** Pending lines are recorded this often. @default 250 */
  readonly flushMs?: number;
  /** Output kept per step execution before it is cut with a marker. @default 65536 */
  readonly capBytes?: number;
  /** A batch that could not be recorded is dropped (output is best effort) and reported here. */
  readonly onError: (error: Error) => void;
}

/**
 * A step execution's output: lines redacted as they come, recorded in batches every `flushMs`,
 * and cut with a marker once `capBytes` were kept. `close` records what is left; `drain` hands it
 * back instead, for the caller to record with the step's result.
 */
export class OutputBuffer {
  private pending: OutputChunk[] = [];
  private streamSeq = 0;
  private bytes = 0;
  private truncated = false;
  private flushing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private readonly cap: number;

  constructor(private readonly options: OutputBufferOptions) {
    this.cap = options.capBytes ?? 64 * 1024;
    this.timer = setInterval(() => void this.flush(), options.flushMs ?? 250);
  }

  /** Takes one line of output (the action's output sink). */
  readonly push = (stream: 'stdout' | 'stderr', raw: string): void => {
    if (this.truncated) return;
    const text = this.options.redact(raw);
    this.bytes += Buffer.byteLength(text);
    if (this.bytes > this.cap) {
      this.truncated = true;
      this.pending.push({
        stream: 'stderr',
        text: `[output truncated after ${this.cap} bytes]`,
        streamSeq: ++this.streamSeq,
      });
      return;
    }
    this.pending.push({ stream, text, streamSeq: ++this.streamSeq });
  };

  /** Records the pending lines as one batch, after any batch still being recorded. */
  flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return this.flushing;
    this.flushing = this.flushing
      .then(() => this.options.record(batch))
      .catch((error: unknown) => this.options.onError(error as Error));
    return this.flushing;
  }

  /** Stops the timer and records what is left. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  /** Stops the timer, waits for the batches being recorded, and returns the lines not recorded yet. */
  async drain(): Promise<OutputChunk[]> {
    clearInterval(this.timer);
    await this.flushing;
    const rest = this.pending;
    this.pending = [];
    return rest;
  }
}

import { type Redact, redactJson } from '../shared/domain/redaction.js';

export type Log = (message: string, fields?: Record<string, unknown>) => void;

/**
 * The worker's log while steps hold secrets: every field is redacted with the redactor of every
 * step running now, so a secret value that reaches an error message or a stack never reaches the
 * log, whichever of the worker's steps logged it.
 */
export class RedactingLog {
  private readonly held = new Map<string, Redact>();

  constructor(private readonly sink: Log) {}

  /** The secrets of the step execution `key` were fetched: redact them from every field from now on. */
  hold(key: string, redact: Redact): void {
    this.held.set(key, redact);
  }

  /** The step execution `key` ended: nothing of its secrets outlives it in this worker. */
  forget(key: string): void {
    this.held.delete(key);
  }

  readonly log: Log = (message, fields) => {
    if (!fields || this.held.size === 0) return this.sink(message, fields);
    let redacted = fields;
    for (const redact of this.held.values()) redacted = redactJson(redacted, redact);
    this.sink(message, redacted);
  };
}

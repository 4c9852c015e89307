import { type Redact, redactJson } from '../shared/domain/redaction.js';

export type Log = (message: string, fields?: Record<string, unknown>) => void;

/**
 * The worker's log while a step holds secrets: every field is redacted with the step's redactor,
 * so a secret value that reaches an error message or a stack never reaches the log.
 */
export class RedactingLog {
  private redact?: Redact;

  constructor(private readonly sink: Log) {}

  /** The step's secrets were fetched: redact them from every field from now on. */
  hold(redact: Redact): void {
    this.redact = redact;
  }

  /** The step ended: nothing of its secrets outlives it in this worker. */
  forget(): void {
    this.redact = undefined;
  }

  readonly log: Log = (message, fields) => {
    const redact = this.redact;
    this.sink(message, fields && redact ? redactJson(fields, redact) : fields);
  };
}

import { makeRedactor, type Redact, redactJson } from '../shared/domain/redaction.js';
import { holdSecrets, releaseSecrets } from '../shared/observability/logger.js';

export type Log = (message: string, fields?: Record<string, unknown>) => void;

/**
 * The worker's log while steps hold secrets: every field is redacted with one redactor over the
 * secrets of every step running now (longest value first, so a secret that contains another is
 * masked whole), so a secret value that reaches an error message or a stack never reaches the
 * log, whichever of the worker's steps logged it. Holding a step's secrets here also holds them
 * for the process's other logs (`holdSecrets`), until the step is forgotten.
 */
export class RedactingLog {
  private readonly held = new Map<string, readonly string[]>();
  private redact?: Redact;

  constructor(
    private readonly sink: Log,
    /** Patterns redacted besides the secret values; the default credential patterns when not given. */
    private readonly patterns?: readonly RegExp[],
  ) {}

  /** The secrets of the step execution `key` were fetched: redact them from every field from now on. */
  hold(key: string, secrets: readonly string[]): void {
    this.held.set(key, secrets);
    holdSecrets(secrets);
    this.rebuild();
  }

  /** The step execution `key` ended: nothing of its secrets outlives it in this worker. */
  forget(key: string): void {
    const secrets = this.held.get(key);
    if (!secrets) return;
    this.held.delete(key);
    releaseSecrets(secrets);
    this.rebuild();
  }

  readonly log: Log = (message, fields) => {
    const redact = this.redact;
    this.sink(message, fields && redact ? redactJson(fields, redact) : fields);
  };

  private rebuild(): void {
    this.redact =
      this.held.size === 0 ? undefined : makeRedactor([...new Set([...this.held.values()].flat())], this.patterns);
  }
}

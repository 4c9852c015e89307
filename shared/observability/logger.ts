import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@aws-lambda-powertools/logger';
import { DEFAULT_REDACTION_PATTERNS, makeRedactor, type Redact } from '../domain/redaction.js';

/**
 * The structured fields of seed 000 section 6.2, under the names the event envelope uses:
 * tenant (`tenant_id`), run (`session_id`), step (`step_number`), target, worker, sandbox profile,
 * event type, command hash, approval id and blast radius.
 */
export interface LogContext {
  readonly tenantId?: string;
  readonly runId?: string;
  readonly stepId?: string;
  readonly targetId?: string;
  readonly workerId?: string;
  readonly sandboxProfile?: string;
  readonly eventType?: string;
  readonly commandHash?: string;
  readonly approvalId?: string;
  readonly blastRadius?: string;
}

const CONTEXT_KEYS: ReadonlyArray<keyof LogContext> = [
  'tenantId',
  'runId',
  'stepId',
  'targetId',
  'workerId',
  'sandboxProfile',
  'eventType',
  'commandHash',
  'approvalId',
  'blastRadius',
];

/** The context fields found in `value` (an event, a command, a task input), and nothing else. */
export function logContextOf(value: unknown): LogContext {
  if (value === null || typeof value !== 'object') return {};
  const record = value as Record<string, unknown>;
  return Object.fromEntries(
    CONTEXT_KEYS.flatMap((key) => (typeof record[key] === 'string' && record[key] !== '' ? [[key, record[key]]] : [])),
  );
}

/**
 * Secret values known to this process (the secrets of the steps a worker runs now), each with
 * how many steps hold it: a value two steps share stays redacted until both let it go. Every log
 * line is redacted with them and with the credential patterns, whatever logged it.
 */
const heldSecrets = new Map<string, number>();
let redact: Redact = makeRedactor([], DEFAULT_REDACTION_PATTERNS);

/** Redacts these values from every log line until they are released as often as they were held. */
export function holdSecrets(values: readonly string[]): void {
  for (const value of values) heldSecrets.set(value, (heldSecrets.get(value) ?? 0) + 1);
  redact = makeRedactor([...heldSecrets.keys()], DEFAULT_REDACTION_PATTERNS);
}

/** The values are no longer in one holder's hands. */
export function releaseSecrets(values: readonly string[]): void {
  for (const value of values) {
    const holders = (heldSecrets.get(value) ?? 0) - 1;
    if (holders > 0) heldSecrets.set(value, holders);
    else heldSecrets.delete(value);
  }
  redact = makeRedactor([...heldSecrets.keys()], DEFAULT_REDACTION_PATTERNS);
}

/** Redacts every string a log line serialises: messages, fields, error messages and stacks. */
const redactingReplacer = (_key: string, value: unknown): unknown => {
  if (typeof value === 'string') return redact(value);
  if (typeof value === 'bigint') return value.toString();
  return value;
};

/** The one way Capstan builds a logger: JSON lines, secrets redacted, the service named. */
export function makeLogger(serviceName: string, persistentKeys: LogContext = {}): Logger {
  return new Logger({ serviceName, persistentKeys: { ...persistentKeys }, jsonReplacerFn: redactingReplacer });
}

const scoped = new AsyncLocalStorage<LogContext>();

/** Runs `work` with these fields added to every line logged through {@link withContextFields} inside it. */
export function withLogContext<T>(context: LogContext, work: () => Promise<T>): Promise<T> {
  return scoped.run({ ...scoped.getStore(), ...context }, work);
}

/** A line's fields with the scope's context fields first (the line's own fields win). */
export function withContextFields(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...scoped.getStore(), ...fields };
}

/** What replaces a secret in outputs, events and logs. */
export const REDACTED = '[REDACTED]';

/** Credentials recognised by shape even when no step named them as secrets. */
export const DEFAULT_REDACTION_PATTERNS: readonly RegExp[] = [
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}\b/g,
  /https:\/\/hooks\.slack\.com\/services\/[A-Za-z0-9/_-]+/g,
];

/** Secret values shorter than this are not redacted (they would blank out ordinary words). */
const MIN_SECRET_LENGTH = 4;

export type Redact = (text: string) => string;

/**
 * A redactor for the given secret values and patterns: each value (longest first, so one that
 * contains another goes whole) and each pattern match becomes `[REDACTED]`.
 */
export function makeRedactor(
  values: readonly string[],
  patterns: readonly RegExp[] = DEFAULT_REDACTION_PATTERNS,
): Redact {
  const secrets = [...new Set(values.filter((v) => v.length >= MIN_SECRET_LENGTH))].sort((a, b) => b.length - a.length);
  return (text) => {
    let result = text;
    for (const secret of secrets) result = result.replaceAll(secret, REDACTED);
    for (const pattern of patterns)
      result = result.replace(new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`), REDACTED);
    return result;
  };
}

/** Redacts every string inside a JSON value. */
export function redactJson<T>(value: T, redact: Redact): T {
  if (typeof value === 'string') return redact(value) as T;
  if (Array.isArray(value)) return value.map((item: unknown) => redactJson(item, redact)) as T;
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactJson(v, redact)])) as T;
  return value;
}

/** Patterns from configuration: a JSON array of regular expression sources. */
export function parsePatterns(text: string | undefined): RegExp[] {
  if (!text) return [];
  const parsed: unknown = JSON.parse(text);
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === 'string'))
    throw new Error('CAPSTAN_REDACT_PATTERNS must be a JSON array of regular expressions');
  return parsed.map((source) => new RegExp(source, 'g'));
}

import { z } from 'zod';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
const DURATION = /^(\d+)(ms|s|m|h)$/;

/** Parses `500ms`, `30s`, `5m` or `2h` into milliseconds; undefined when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match) return undefined;
  const [, amount, unit] = match;
  return Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS];
}

/** Milliseconds of a duration already validated by {@link durationSchema}. */
export function durationMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new TypeError(`'${text}' is not a duration`);
  return ms;
}

/**
 * A duration written as text (`60s`). It stays text in the stored runbook, so a stored
 * runbook parses again with the same schema; {@link durationMs} reads it.
 */
export const durationSchema = z.string().refine((text) => (parseDuration(text) ?? 0) > 0, {
  error: (issue) =>
    `'${String(issue.input)}' is not a duration: use a positive whole number with ms, s, m or h (e.g. 30s)`,
});

import { z } from 'zod';

/** A source is a runbook id or a trigger source: `api`, `eventbridge:<source>`, `webhook:<source>`. */
export const sourceSchema = z.string().regex(/^[A-Za-z0-9._:-]{1,100}$/);
const reasonSchema = z.string().min(1).max(500);

export const pauseBodySchema = z.strictObject({ source: sourceSchema, reason: reasonSchema });
export const throttleBodySchema = z.strictObject({
  source: sourceSchema,
  maxPerMinute: z.number().int().min(0).max(100_000),
  until: z.iso.datetime(),
  reason: reasonSchema,
});

/** A dynamic control on one source (seed 004 section 4.3). */
export const limitSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('pause'),
    tenantId: z.string(),
    source: z.string(),
    reason: z.string(),
    by: z.string(),
    at: z.iso.datetime(),
  }),
  z.strictObject({
    kind: z.literal('throttle'),
    tenantId: z.string(),
    source: z.string(),
    maxPerMinute: z.number().int().min(0),
    until: z.iso.datetime(),
    reason: z.string(),
    by: z.string(),
    at: z.iso.datetime(),
  }),
]);
export type Limit = z.infer<typeof limitSchema>;

/** The control in force on `source` at `now`: a pause wins over a throttle; an expired throttle is none. */
export function activeLimit(limits: readonly Limit[], source: string, now: Date): Limit | undefined {
  const mine = limits.filter((l) => l.source === source);
  const pause = mine.find((l) => l.kind === 'pause');
  if (pause) return pause;
  return mine.find((l) => l.kind === 'throttle' && Date.parse(l.until) > now.getTime());
}

/** The trigger source a run counts against: `api` for API calls. */
export const triggerSource = (trigger: { type: string; source: string } | undefined): string =>
  trigger && trigger.type !== 'api' ? `${trigger.type}:${trigger.source}` : 'api';

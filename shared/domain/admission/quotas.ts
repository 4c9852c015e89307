import { z } from 'zod';
import type { Priority } from '../entities.js';

/** `"*"` is every runbook of the tenant; otherwise one runbook id. */
export const quotaScopeSchema = z.union([z.literal('*'), z.string().regex(/^[A-Za-z0-9._-]{1,64}$/)]);

/** A tenant's quota on one runbook or on all of them (seed 004 section 4.1). */
export const quotaBodySchema = z.strictObject({
  runbook: quotaScopeSchema,
  maxActive: z.number().int().min(0).max(10_000).optional(),
  maxPerHour: z.number().int().min(0).max(1_000_000).optional(),
  /** A token bucket's capacity; it refills at `maxPerHour` per hour, or `burst` per minute without one. */
  burst: z.number().int().min(1).max(10_000).optional(),
  /** Emergency runs skip the backlog within their own active allowance. */
  emergency: z.strictObject({ maxActive: z.number().int().min(0).max(10_000) }).optional(),
});
export type QuotaBody = z.infer<typeof quotaBodySchema>;

export const quotaSchema = quotaBodySchema.extend({
  tenantId: z.string(),
  updatedAt: z.iso.datetime(),
  updatedBy: z.string(),
});
export type Quota = z.infer<typeof quotaSchema>;

/** A token bucket as stored: tokens left at `at`. */
export interface Bucket {
  readonly tokens: number;
  readonly at: string;
}

/** Tokens a bucket holds at `now`, refilled at `perMs` since it was last taken from. */
export function refill(bucket: Bucket | undefined, capacity: number, perMs: number, now: Date): number {
  if (!bucket) return capacity;
  const elapsed = Math.max(0, now.getTime() - Date.parse(bucket.at));
  return Math.min(capacity, bucket.tokens + elapsed * perMs);
}

/** The refill rate of a quota's bucket, in tokens per millisecond. */
export const refillPerMs = (quota: Pick<QuotaBody, 'burst' | 'maxPerHour'>): number =>
  quota.maxPerHour !== undefined && quota.maxPerHour > 0 ? quota.maxPerHour / 3_600_000 : (quota.burst ?? 1) / 60_000;

/** The start of the fixed window of `ms` holding `now`, and the start of the next one. */
export function windowOf(now: Date, ms: number): { start: string; next: string } {
  const start = Math.floor(now.getTime() / ms) * ms;
  return { start: new Date(start).toISOString(), next: new Date(start + ms).toISOString() };
}

export const HOUR_MS = 3_600_000;
export const MINUTE_MS = 60_000;

/** The order admission follows: higher priority first, then the oldest. */
export const PRIORITY_RANK: Readonly<Record<Priority, number>> = { emergency: 0, high: 1, normal: 2, low: 3 };

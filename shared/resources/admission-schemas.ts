import { z } from 'zod';
import { breakerStateSchema } from '../domain/admission/breaker.js';
import { limitSchema, pauseBodySchema, throttleBodySchema } from '../domain/admission/limits.js';
import { quotaBodySchema, quotaSchema } from '../domain/admission/quotas.js';

/** Request and response schemas of the admission routes (quotas, limits, breakers). */
export const quotaPathSchema = z.object({ id: z.string().regex(/^(\*|[A-Za-z0-9._-]{1,64})$/) });
export const breakerPathSchema = z.object({ runbook: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/) });
export const quotaPatchSchema = quotaBodySchema.partial();
export const quotaListSchema = z.looseObject({ quotas: z.array(quotaSchema) });
export const quotaViewSchema = quotaSchema;
export const limitListSchema = z.looseObject({ limits: z.array(limitSchema) });
export const limitViewSchema = z.looseObject({ source: z.string() });
export const breakerListSchema = z.looseObject({ breakers: z.array(breakerStateSchema) });
export const breakerResetBodySchema = z.strictObject({ reason: z.string().min(1).max(500).optional() });
export { breakerStateSchema, pauseBodySchema, quotaBodySchema, throttleBodySchema };

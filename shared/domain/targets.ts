import { z } from 'zod';

/** A node id as the inventory and step targets name it: a host name, instance id or service name. */
export const nodeIdSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/,
    'must be 1-128 letters, digits, ., _, : or -, starting with a letter or digit',
  );

/** What a step may read of a node as `{{ target.attributes.<key> }}`: plain strings, never code. */
export const nodeAttributesSchema = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, 'must be an identifier'),
  z.string().max(1024),
);

/** One resolved target of a step, as its command carries it. */
export const resolvedTargetSchema = z.strictObject({
  id: nodeIdSchema,
  source: z.enum(['agent', 'declared']),
  attributes: nodeAttributesSchema,
});
export type ResolvedTarget = z.infer<typeof resolvedTargetSchema>;

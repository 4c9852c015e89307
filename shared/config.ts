import { z } from 'zod';

/**
 * Settings every component reads from its environment, parsed once at cold start.
 * Endpoints are not settings here: the AWS SDK reads `AWS_ENDPOINT_URL_<SERVICE>` itself,
 * which is how the local stack points the same code at local services.
 */
export const configSchema = z.object({
  CAPSTAN_PREFIX: z.string().min(1).default('capstan'),
  CAPSTAN_ENVIRONMENT: z.enum(['dev', 'staging', 'prod']).default('prod'),
  CAPSTAN_STATE_TABLE: z.string().min(1),
  CAPSTAN_EVENTS_TABLE: z.string().min(1),
  CAPSTAN_CONNECTIONS_TABLE: z.string().min(1),
  CAPSTAN_EVIDENCE_BUCKET: z.string().min(1).optional(),
  CAPSTAN_STATE_MACHINE_ARN: z.string().min(1).optional(),
  CAPSTAN_EVENT_BUS: z.string().min(1).optional(),
  CAPSTAN_WS_ENDPOINT: z.string().min(1).optional(),
  CAPSTAN_JWT_ISSUER: z.string().min(1).optional(),
  CAPSTAN_JWT_AUDIENCE: z.string().min(1).default('capstan'),
  CAPSTAN_JWKS_URL: z.url().optional(),
});
export type CapstanConfig = z.infer<typeof configSchema>;

/** Parses the environment; a missing or bad variable fails with its name. */
export function parseConfig(env: Readonly<Record<string, string | undefined>>): CapstanConfig {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  return parsed.data;
}

let cached: CapstanConfig | undefined;

/** The process configuration, parsed on first use and then kept. */
export function config(): CapstanConfig {
  cached ??= parseConfig(process.env);
  return cached;
}

/** A setting that is optional in the schema but required by the caller; names the variable when absent. */
export function required<K extends keyof CapstanConfig>(key: K): NonNullable<CapstanConfig[K]> {
  const value = config()[key];
  if (value === undefined || value === null) throw new Error(`invalid configuration: ${String(key)} is required here`);
  return value as NonNullable<CapstanConfig[K]>;
}

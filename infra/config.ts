import { readFileSync } from 'node:fs';
import type { App } from 'aws-cdk-lib';
import { z } from 'zod';
import { parsePolicy } from '../shared/domain/policy.js';
import { capacitySchema } from '../shared/config.js';
import { checkRoutes, readRoutes, runbookNamesIn } from '../shared/resources/intake-routes.js';
import {
  environmentSchema,
  SANDBOX_PROFILE_NAMES,
  sandboxProfileNameSchema,
} from '../shared/domain/sandbox-profiles.js';

/** Deployment settings a tenant account sets in cdk.json context or with `-c key=value`. */
export const deploymentConfigSchema = z.strictObject({
  /** Resource name prefix; also the queue name prefix. */
  prefix: z
    .string()
    .regex(/^[a-z][a-z0-9-]{1,20}$/)
    .default('capstan'),
  environment: environmentSchema.default('prod'),
  /** Issuer (`iss`) of the JWTs the API accepts. */
  jwtIssuer: z.url(),
  /** JWKS endpoint that holds the issuer's signing keys. */
  jwksUrl: z.url(),
  /**
   * The tenant (the tokens' `tenant` claim) of the team that runs this deployment: its
   * principals list the workers, and its operators and admins drain them.
   */
  platformTenant: z.string().min(1).default('platform'),
  /** Audience (`aud`) the JWTs must carry. */
  jwtAudience: z.string().min(1).default('capstan'),
  /** Where alarms send email; no subscription when empty. */
  alarmEmail: z.union([z.email(), z.literal('')]).default(''),
  /** Sandbox profiles that get workers in this account. */
  profiles: z
    .array(sandboxProfileNameSchema)
    .min(1)
    .default([...SANDBOX_PROFILE_NAMES]),
  /** Secrets the workers may read live under `<secretPrefix>/<profile>/`. */
  secretPrefix: z
    .string()
    .regex(/^[A-Za-z0-9/_+=.@-]+$/)
    .default('capstan'),
  /** A JSON policy document (docs/policy.md), checked at synth; the built-in default when empty. */
  policyFile: z.string().default(''),
  /** The ticket routing document (JSON, docs/intake.md), checked at synth; no rule when empty. */
  routesFile: z.string().default(''),
  /** The runbooks the deployment registers: a routing rule must name one of them. */
  runbooksDir: z.string().default('examples/runbooks'),
  /** The operator console's OIDC client id at `jwtIssuer` (a public client: code + PKCE, no secret). */
  consoleClientId: z.string().min(1).default('capstan-console'),
  /** A Slack-compatible incoming webhook for approval requests and escalations; none when empty. */
  notifyWebhookUrl: z.union([z.url(), z.literal('')]).default(''),
  /**
   * Capacity per sandbox profile (the schema the functions read as `CAPSTAN_CAPACITY`): the queue
   * backlog past which admission holds new runs, and each worker service's scaling bounds and target.
   */
  capacity: capacitySchema.default({}),
});
export type DeploymentConfig = z.infer<typeof deploymentConfigSchema>;

/** Reads `capstan:*` context keys into a validated {@link DeploymentConfig}; a bad key fails synth with its name. */
export function readDeploymentConfig(app: App): DeploymentConfig {
  const keys = [
    'prefix',
    'environment',
    'jwtIssuer',
    'jwksUrl',
    'jwtAudience',
    'platformTenant',
    'alarmEmail',
    'profiles',
    'secretPrefix',
    'policyFile',
    'routesFile',
    'runbooksDir',
    'notifyWebhookUrl',
    'consoleClientId',
    'capacity',
  ] as const;
  const raw: Record<string, unknown> = {};
  for (const key of keys) {
    const value = app.node.tryGetContext(`capstan:${key}`);
    if (value === undefined) continue;
    // `-c` on the command line gives strings: a profile list, or the capacity as JSON.
    if (key === 'profiles' && typeof value === 'string') raw[key] = value.split(',');
    else if (key === 'capacity' && typeof value === 'string') raw[key] = parseJsonContext(key, value);
    else raw[key] = value;
  }
  const parsed = deploymentConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `capstan:${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid deployment context: ${problems}`);
  }
  return parsed.data;
}

function parseJsonContext(key: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`invalid deployment context: capstan:${key}: is not JSON`);
  }
}

/** The policy document as the Plan function reads it, validated now so a bad one fails synth. */
export function policyText(config: Pick<DeploymentConfig, 'policyFile'>): string {
  if (config.policyFile === '') return '';
  const text = readFileSync(config.policyFile, 'utf8');
  const policy = parsePolicy(text);
  if (policy instanceof Error) throw new Error(`capstan:policyFile ${config.policyFile}: ${policy.message}`);
  return JSON.stringify(policy);
}

/**
 * The routing document as the intake functions read it, checked now: a bad document, or a rule
 * whose runbook is not among `capstan:runbooksDir`'s files, fails synth.
 */
export function routesText(config: Pick<DeploymentConfig, 'routesFile' | 'runbooksDir' | 'platformTenant'>): string {
  if (config.routesFile === '') return '';
  const routes = readRoutes(config.routesFile);
  const names = runbookNamesIn(config.runbooksDir);
  try {
    checkRoutes(routes, (_tenant, runbook) => names.has(runbook), config.platformTenant);
  } catch (error) {
    throw new Error(`capstan:routesFile ${config.routesFile}: ${(error as Error).message}`);
  }
  return JSON.stringify(routes);
}

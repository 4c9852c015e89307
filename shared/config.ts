import { z } from 'zod';
import { SANDBOX_PROFILES, type SandboxProfileName, sandboxProfileNameSchema } from './domain/sandbox-profiles.js';

/**
 * One sandbox profile's capacity (seed 002 WO-012, seed 003's `max_pending`): the queue backlog
 * past which admission holds new runs back, and the bounds and target of its worker pool, which
 * scales on queue backlog per worker (Application Auto Scaling in AWS, the local scaler locally).
 */
export const profileCapacitySchema = z
  .strictObject({
    /** Visible messages in the profile's queue at which admission starts holding new runs (`backlog`). */
    maxBacklog: z.number().int().min(1).max(1_000_000).default(500),
    /** Workers kept when idle; the profile's `desiredCount` when unset. */
    minWorkers: z.number().int().min(0).max(1_000).optional(),
    /** The most workers a burst grows the pool to. @default 4 */
    maxWorkers: z.number().int().min(1).max(1_000).default(4),
    /** Messages (waiting and in flight) one worker is expected to hold: the scaling target. */
    backlogPerWorker: z.number().int().min(1).max(10_000).default(10),
    /**
     * Step executions one worker runs at once. More than one suits steps that mostly wait on other
     * systems; see docs/capacity.md for what it costs when a worker dies. @default 1
     */
    stepsPerWorker: z.number().int().min(1).max(64).default(1),
  })
  .refine((c) => c.minWorkers === undefined || c.minWorkers <= c.maxWorkers, {
    message: 'minWorkers must not exceed maxWorkers',
  });

/** Capacity per sandbox profile; a profile left out gets the defaults. */
export const capacitySchema = z.partialRecord(sandboxProfileNameSchema, profileCapacitySchema);
export type CapacityConfig = z.infer<typeof capacitySchema>;
export type ProfileCapacity = Required<z.infer<typeof profileCapacitySchema>>;

/** A profile's capacity with every default filled in. */
export function capacityOf(capacity: CapacityConfig | undefined, profile: SandboxProfileName): ProfileCapacity {
  const given = capacity?.[profile] ?? profileCapacitySchema.parse({});
  const minWorkers = given.minWorkers ?? Math.min(SANDBOX_PROFILES[profile].container.desiredCount, given.maxWorkers);
  return { ...given, minWorkers };
}

/** JSON text parsed, then checked by `schema`; bad JSON is an issue on the variable, not a throw. */
const jsonOf = <T>(schema: z.ZodType<T>) =>
  z
    .string()
    .transform((text, ctx): unknown => {
      try {
        return JSON.parse(text);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'is not JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
import { nodeAttributesSchema, nodeIdSchema } from './domain/inventory.js';

/**
 * Settings every component reads from its environment, parsed once at cold start.
 * In AWS every endpoint is the SDK's default; locally `AWS_ENDPOINT_URL_<SERVICE>` (or
 * `AWS_ENDPOINT_URL` for all) points the same code at the local services, see `endpointFor`.
 */
export const configSchema = z.object({
  CAPSTAN_PREFIX: z.string().min(1).default('capstan'),
  /**
   * Requests this process's DynamoDB client has in flight at once (its sockets); the SDK's 50 when
   * unset. The local stack's functions get 4: they share one process, and DynamoDB Local serves one
   * request at a time, so a burst of theirs queues in the stack rather than ahead of every worker's
   * lease and heartbeat (docs/architecture.md).
   */
  CAPSTAN_DYNAMODB_MAX_SOCKETS: z.preprocess(
    (value) => (value === '' ? undefined : value),
    z.coerce.number().int().min(1).max(1_000).optional(),
  ),
  CAPSTAN_ENVIRONMENT: z.enum(['dev', 'staging', 'prod']).default('prod'),
  CAPSTAN_STATE_TABLE: z.string().min(1),
  CAPSTAN_EVENTS_TABLE: z.string().min(1),
  CAPSTAN_CONNECTIONS_TABLE: z.string().min(1),
  CAPSTAN_EVIDENCE_BUCKET: z.string().min(1).optional(),
  /** The asymmetric KMS key (ECC_NIST_P256, SIGN_VERIFY) that signs evidence manifests: id, ARN or alias. */
  CAPSTAN_EVIDENCE_KEY_ID: z.string().min(1).optional(),
  /** The largest artifact a step may store, in bytes. */
  CAPSTAN_ARTIFACT_MAX_BYTES: z.coerce.number().int().min(1).max(104_857_600).default(1_048_576),
  CAPSTAN_STATE_MACHINE_ARN: z.string().min(1).optional(),
  CAPSTAN_EVENT_BUS: z.string().min(1).optional(),
  CAPSTAN_WS_ENDPOINT: z.string().min(1).optional(),
  CAPSTAN_JWT_ISSUER: z.string().min(1).optional(),
  CAPSTAN_JWT_AUDIENCE: z.string().min(1).default('capstan'),
  CAPSTAN_JWKS_URL: z.url().optional(),
  /** The longest a token may live (`exp - iat`); a token without `exp` or `iat` is refused. */
  CAPSTAN_JWT_MAX_LIFETIME_SECONDS: z.coerce.number().int().min(60).max(604_800).default(86_400),
  /**
   * The deployment's own tenant: workers are fleet infrastructure, listed by its principals and
   * drained by its operators and admins only. Unset, no tenant sees the fleet.
   */
  CAPSTAN_PLATFORM_TENANT: z.string().min(1).optional(),
  /** Reconciler sweeps per scheduled invocation, 20 s apart. */
  CAPSTAN_RECONCILE_SWEEPS: z.coerce.number().int().min(1).max(3).default(3),
  CAPSTAN_WORKER_HEARTBEAT_SECONDS: z.coerce.number().int().min(1).max(300).default(15),
  CAPSTAN_NOTIFY_WEBHOOK_URL: z.url().optional(),
  /** How long an open circuit breaker refuses its runbook's runs before one probe goes through. */
  CAPSTAN_BREAKER_COOLDOWN_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
  /** The deployment's policy document (JSON, see docs/policy.md); the built-in default when unset. */
  CAPSTAN_POLICY: z.string().optional(),
  /** The routing document for ticket intake (JSON, see docs/intake.md); no rule matches when unset. */
  CAPSTAN_ROUTES: z.string().optional(),
  /** Where links in notifications point: `<base>/v1/runs/<id>`. */
  CAPSTAN_LINK_BASE_URL: z.url().optional(),
  /** Capacity per sandbox profile (JSON, `capacitySchema`): backpressure bound and worker pool bounds. */
  CAPSTAN_CAPACITY: jsonOf(capacitySchema).optional(),
  /** Locally: the JSON-lines file spans are appended to (in AWS they go to X-Ray). */
  CAPSTAN_TRACE_FILE: z.string().min(1).optional(),
});
export type CapstanConfig = z.infer<typeof configSchema>;

/** Parses the environment; a missing or bad variable fails with its name. */
export function parseConfig(env: Readonly<Record<string, string | undefined>>): CapstanConfig {
  return parseWith(configSchema, env);
}

let cached: CapstanConfig | undefined;

/** The process configuration, parsed on first use and then kept. */
export function config(): CapstanConfig {
  cached ??= parseConfig(process.env);
  return cached;
}

/** The worker's own settings, besides the shared ones; parsed by `workerConfig`. */
export const workerConfigSchema = z.object({
  CAPSTAN_SANDBOX_PROFILE: sandboxProfileNameSchema,
  CAPSTAN_WORKER_NAME: z.string().min(1).optional(),
  CAPSTAN_WORKER_GROUPS: z.string().default(''),
  /** Makes the worker an agent node of this id: it registers in the inventory and receives that node's commands. */
  CAPSTAN_NODE_ID: nodeIdSchema.optional(),
  /** The tenant whose inventory an agent node joins; the platform tenant when unset. */
  CAPSTAN_NODE_TENANT: z.string().min(1).optional(),
  /** What an agent node says of itself (a JSON object of strings), for `{{ target.attributes.<key> }}`. */
  CAPSTAN_NODE_ATTRIBUTES: jsonOf(nodeAttributesSchema).optional(),
  CAPSTAN_VERSION: z.string().default('dev'),
  /** The allow-listed script catalogue; the one shipped beside the worker when unset. */
  CAPSTAN_SCRIPTS_DIR: z.string().min(1).optional(),
  /** A JSON array of regular expressions redacted besides secret values. */
  CAPSTAN_REDACT_PATTERNS: z.string().optional(),
  /**
   * Off unless set, for the chaos suite only: the worker kills itself (SIGKILL) right after the
   * `test.counter` action added one to a key starting with this prefix, before the receipt exists.
   */
  CAPSTAN_TEST_CRASH_AFTER_COUNTER: z.string().min(1).optional(),
  /** Set by ECS in every task: where the worker reads its task ARN, so the task's stop names it. */
  ECS_CONTAINER_METADATA_URI_V4: z.url().optional(),
  /** On Fargate: the X-Ray daemon sidecar (`host:port`) the worker's spans are sent to. */
  AWS_XRAY_DAEMON_ADDRESS: z.string().min(1).optional(),
});
export type WorkerConfig = z.infer<typeof workerConfigSchema>;

/** Parses `schema` over `env`; a missing or bad variable fails with its name. */
function parseWith<T>(schema: z.ZodType<T>, env: Readonly<Record<string, string | undefined>>): T {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  return parsed.data;
}

/** Parses a worker's environment: the shared settings and the worker's own. */
export function parseWorkerConfig(env: Readonly<Record<string, string | undefined>>): CapstanConfig & WorkerConfig {
  return { ...parseConfig(env), ...parseWith(workerConfigSchema, env) };
}

let cachedWorker: (CapstanConfig & WorkerConfig) | undefined;

/** The worker process's configuration, parsed on first use and then kept. */
export function workerConfig(): CapstanConfig & WorkerConfig {
  cachedWorker ??= parseWorkerConfig(process.env);
  return cachedWorker;
}

/** A setting that is optional in the schema but required by the caller; names the variable when absent. */
export function required<K extends keyof CapstanConfig>(key: K): NonNullable<CapstanConfig[K]> {
  const value = config()[key];
  if (value === undefined || value === null) throw new Error(`invalid configuration: ${String(key)} is required here`);
  return value as NonNullable<CapstanConfig[K]>;
}

/** The AWS services Capstan calls, by the suffix of their `AWS_ENDPOINT_URL_<SERVICE>` variable. */
export const AWS_SERVICES = {
  dynamodb: 'DYNAMODB',
  dynamodbStreams: 'DYNAMODB_STREAMS',
  sqs: 'SQS',
  s3: 'S3',
  sfn: 'SFN',
  secretsManager: 'SECRETS_MANAGER',
  eventBridge: 'EVENTBRIDGE',
  apiGatewayManagement: 'APIGATEWAYMANAGEMENTAPI',
  lambda: 'LAMBDA',
  ecs: 'ECS',
  ssm: 'SSM',
  kms: 'KMS',
} as const;
export type AwsService = keyof typeof AWS_SERVICES;

const endpointSchema = z.url({ protocol: /^https?$/ }).optional();

/**
 * The endpoint a client for `service` uses: `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`,
 * else undefined (the SDK's regional default). A malformed value fails with the variable's name.
 */
export function endpointFor(
  service: AwsService,
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | undefined {
  const specific = `AWS_ENDPOINT_URL_${AWS_SERVICES[service]}`;
  const name = env[specific] !== undefined ? specific : 'AWS_ENDPOINT_URL';
  const parsed = endpointSchema.safeParse(env[name] || undefined);
  if (!parsed.success) throw new Error(`invalid configuration: ${name} must be an http(s) URL, got '${env[name]}'`);
  return parsed.data;
}

/** How many requests the DynamoDB client sends at once, where the configuration caps it. */
export function dynamoDbSockets(env: Readonly<Record<string, string | undefined>> = process.env): number | undefined {
  return parseWith(configSchema.pick({ CAPSTAN_DYNAMODB_MAX_SOCKETS: true }), env).CAPSTAN_DYNAMODB_MAX_SOCKETS;
}

/** Client settings for `service`: the resolved endpoint, and path-style S3 addressing when local. */
export function clientConfig(service: AwsService): { endpoint?: string; forcePathStyle?: boolean } {
  const endpoint = endpointFor(service);
  if (endpoint === undefined) return {};
  return service === 's3' ? { endpoint, forcePathStyle: true } : { endpoint };
}

/**
 * Whether this process sends segments to X-Ray through Powertools Tracer: in a Lambda function only,
 * unless `POWERTOOLS_TRACE_ENABLED` is `false` (as the local stack sets it). A worker on Fargate
 * (`AWS_EXECUTION_ENV` is `AWS_ECS_FARGATE`) sends its spans to the X-Ray daemon itself.
 */
export function lambdaXRayTracing(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  const executionEnv = env.AWS_EXECUTION_ENV ?? '';
  return (
    executionEnv.startsWith('AWS_Lambda_') &&
    executionEnv !== 'AWS_Lambda_amplify-mock' &&
    (env.AWS_SAM_LOCAL ?? '') === '' &&
    (env.POWERTOOLS_TRACE_ENABLED ?? '').toLowerCase() !== 'false'
  );
}

/**
 * The local span file alone, for the observability middleware: it runs before any handler reads
 * the rest of the configuration, and must not fail an invocation the handler itself would answer.
 */
export function traceFile(): string | undefined {
  return configSchema.shape.CAPSTAN_TRACE_FILE.parse(process.env.CAPSTAN_TRACE_FILE);
}

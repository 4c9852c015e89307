import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayAuthorizerResult, APIGatewayRequestAuthorizerEvent, DynamoDBStreamEvent } from 'aws-lambda';
import { ensureTables } from '../shared/adapters/dynamodb/tables.js';
import type { SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import { TABLES, type TableKey } from '../shared/resources/tables.js';
import {
  DEFINITION_FUNCTIONS,
  loadRunInterpreterDefinition,
  substituteDefinition,
  type DefinitionPlaceholder,
} from '../shared/workflow/definition.js';
import { waitingTaskInputSchema } from '../functions/workflow/task-input.js';
import type { JsonService } from './aws-json.js';
import { type DynamoDbLocal, startDynamoDbLocal } from './dynamodb-local.js';
import { startLocalEventBridge } from './eventbridge.js';
import { asyncTarget, isTicketEvent, lambdaEnvelope, prepareRoutes } from './intake.js';
import { type Gateway, startGateway, WEBSOCKET_PATH } from './gateway.js';
import { ensureConsoleBuilt } from '../console/build.js';
import { LOCAL_IDENTITIES, makeLocalIssuer, type LocalIssuer } from './issuer.js';
import { invokeLocal, lambdaContext } from './lambdas.js';
import { type LocalQueues, startLocalQueues } from './queues.js';
import { type MeteredEndpoint, startMeteredEndpoint } from './request-meter.js';
import { type DemoService, startDemoService } from './demo-service.js';
import { declareDemoNodes } from './demo-nodes.js';
import { startLocalSecrets } from './secrets.js';
import { startLocalKms } from './kms.js';
import { LocalStepFunctions } from './stepfunctions.js';
import { StreamMapping } from './streams.js';
import { type AgentWorkerSpec, WorkerPool } from './workers.js';
import { type Scaler, startLocalScaler } from './scaler.js';
import { parseConfig } from '../shared/config.js';

const ROOT = join(import.meta.dirname, '..');
export const REGION = 'us-east-1';
export const ACCOUNT = '000000000000';
export const PREFIX = 'capstan';
/**
 * A worker's environment: the functions' own, less their DynamoDB socket cap. A worker is a process
 * of its own, as a Fargate task is, and its heartbeats must not queue behind its other requests.
 */
export function workerEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const { CAPSTAN_DYNAMODB_MAX_SOCKETS: _functionsOnly, ...rest } = env;
  return rest;
}

/** Where the local console finds the development identities and their tokens. */
export const LOCAL_IDENTITIES_PATH = '/local/identities.json';

export interface LocalStackOptions {
  /** The gateway's port; the other services take the next nine. */
  readonly port: number;
  /** `.capstan` by default; data lives in `<stateDir>/data`. */
  readonly stateDir: string;
  readonly fresh: boolean;
  readonly workers: Readonly<Partial<Record<SandboxProfileName, number>>>;
  /** Agent node workers (`agent:<node>:<groups>` in `CAPSTAN_WORKERS`), in the platform tenant unless `CAPSTAN_NODE_TENANT` says. */
  readonly agents?: readonly AgentWorkerSpec[];
  /** How often the reconciler runs (its schedule in AWS is every minute). */
  readonly reconcileIntervalMs: number;
  /** How often the backlog admitter's schedule runs (a minute in AWS); 2 s by default. */
  readonly admitIntervalMs?: number;
  /** Extra environment for the handlers and workers (for example a short heartbeat in tests). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Scales each profile's workers on its queue backlog between the bounds of `CAPSTAN_CAPACITY`
   * (as the CDK stack's policy does), reading the queues every `intervalMs` (2 s by default);
   * `workers` is then each pool's starting size. Off when absent: the counts stay fixed.
   */
  readonly autoscale?: { readonly intervalMs?: number };
  /**
   * Declares the demo service's web pool (`demo-web-1` to `-4`, group `demo-web`, each with its
   * `url`) in the local tenant's inventory at start, for the rolling-restart example. Off when absent.
   */
  readonly demoNodes?: boolean;
  /** Puts a counting proxy in front of DynamoDB and SQS (for the bench), on the gateway port + 6 and + 7. */
  readonly meterRequests?: boolean;
  /**
   * Keeps DynamoDB Local's tables in memory, gone when it stops (for the bench, whose stacks start
   * empty). On disk it commits each write to its file under one lock for every table, which no
   * DynamoDB table in AWS does, and the latencies then measure the disk, not Capstan.
   */
  readonly dynamoDbInMemory?: boolean;
  readonly log: (line: string) => void;
}

export interface LocalStack {
  readonly restUrl: string;
  readonly wsUrl: string;
  readonly localFile: string;
  readonly endpoints: Readonly<Record<string, string>>;
  readonly issuer: LocalIssuer;
  readonly workers: WorkerPool;
  /** The worker scaler, when `autoscale` is on: its samples are the pool sizes over time. */
  readonly scaler?: Scaler;
  readonly stepFunctions: LocalStepFunctions;
  readonly resumedExecutions: readonly string[];
  /** The service the example runbooks call (health, tickets, webhooks), on the gateway port + 8. */
  readonly demo: DemoService;
  /** Requests counted at the DynamoDB and SQS endpoints when `meterRequests` is set. */
  readonly meters?: { readonly dynamodb: MeteredEndpoint; readonly sqs: MeteredEndpoint };
  /** DynamoDB Local's process, for the bench's CPU figures. */
  readonly dynamoDbPid: number | undefined;
  stop(): Promise<void>;
  /** Kills the child processes at once; for an exit hook. */
  kill(): void;
}

/** Physical names, the way the CDK stack names them (`infra/names.ts`), in a local account. */
export const LOCAL_NAMES = {
  tables: { state: `${PREFIX}-state`, events: `${PREFIX}-events`, connections: `${PREFIX}-connections` },
  evidenceBucket: `${PREFIX}-evidence-${ACCOUNT}-${REGION}`,
  stateMachineArn: `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${PREFIX}-run-interpreter`,
  eventBus: `${PREFIX}-events`,
  evidenceKeyAlias: `alias/${PREFIX}-evidence`,
} as const satisfies { tables: Record<TableKey, string> } & Record<string, unknown>;

/**
 * Starts all of Capstan on this machine, in dependency order: DynamoDB Local with the tables,
 * fauxqs (SQS + S3), Step Functions, Secrets Manager and EventBridge endpoints, the API
 * gateway (REST + WebSocket), the event-log stream mapping, the reconciler schedule, and the
 * workers. Handlers run in this process with the environment a Lambda gets in AWS; only the
 * endpoints differ.
 */
export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const { port, log } = options;
  const dataDir = join(options.stateDir, 'data');
  if (options.fresh) rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(join(dataDir, 'dynamodb'), { recursive: true });

  const cleanups: Array<() => Promise<void> | void> = [];
  let dynamo: DynamoDbLocal | undefined;
  let workers: WorkerPool | undefined;
  const kill = () => {
    workers?.killAll();
    if (dynamo?.process.exitCode === null) dynamo.process.kill('SIGKILL');
  };
  const stop = async () => {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        log(`stopping: ${(error as Error).message}`);
      }
    }
    cleanups.length = 0;
  };

  // Local credentials and region for every client, including the ones the glue itself uses.
  Object.assign(process.env, { AWS_REGION: REGION, AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local' });
  try {
    dynamo = await startDynamoDbLocal({
      port: port + 1,
      ...(!options.dynamoDbInMemory && { dataDir: join(dataDir, 'dynamodb') }),
      log,
    });
    const dynamoLocal = dynamo;
    cleanups.push(() => dynamoLocal.stop());
    await ensureTables(dynamo.endpoint, TABLES, LOCAL_NAMES.tables);

    const queues: LocalQueues = await startLocalQueues({
      port: port + 2,
      prefix: PREFIX,
      region: REGION,
      evidenceBucket: LOCAL_NAMES.evidenceBucket,
    });
    cleanups.push(() => queues.stop());

    const restUrl = `http://127.0.0.1:${port}`;
    const queueEndpoint = `http://127.0.0.1:${queues.port}`;
    let meters: LocalStack['meters'];
    if (options.meterRequests) {
      // Each meter's thread is stopped with the stack, even when the next one fails to start.
      const dynamodbMeter = await startMeteredEndpoint(dynamo.endpoint);
      cleanups.push(() => dynamodbMeter.close());
      const sqsMeter = await startMeteredEndpoint(queueEndpoint);
      cleanups.push(() => sqsMeter.close());
      meters = { dynamodb: dynamodbMeter, sqs: sqsMeter };
    }
    const endpoints = {
      DYNAMODB: meters?.dynamodb.url ?? dynamo.endpoint,
      DYNAMODB_STREAMS: dynamo.endpoint,
      SQS: meters?.sqs.url ?? queueEndpoint,
      S3: queueEndpoint,
      SFN: `http://127.0.0.1:${port + 3}`,
      SECRETS_MANAGER: `http://127.0.0.1:${port + 4}`,
      EVENTBRIDGE: `http://127.0.0.1:${port + 5}`,
      KMS: `http://127.0.0.1:${port + 9}`,
    };
    // The environment a Lambda function or a worker task gets in AWS, with local endpoints.
    const env: Record<string, string> = {
      AWS_REGION: REGION,
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      ...Object.fromEntries(Object.entries(endpoints).map(([service, url]) => [`AWS_ENDPOINT_URL_${service}`, url])),
      CAPSTAN_PREFIX: PREFIX,
      CAPSTAN_ENVIRONMENT: 'dev',
      CAPSTAN_STATE_TABLE: LOCAL_NAMES.tables.state,
      CAPSTAN_EVENTS_TABLE: LOCAL_NAMES.tables.events,
      CAPSTAN_CONNECTIONS_TABLE: LOCAL_NAMES.tables.connections,
      CAPSTAN_EVIDENCE_BUCKET: LOCAL_NAMES.evidenceBucket,
      CAPSTAN_EVIDENCE_KEY_ID: LOCAL_NAMES.evidenceKeyAlias,
      CAPSTAN_STATE_MACHINE_ARN: LOCAL_NAMES.stateMachineArn,
      CAPSTAN_EVENT_BUS: LOCAL_NAMES.eventBus,
      CAPSTAN_WS_ENDPOINT: `${restUrl}${WEBSOCKET_PATH}`,
      CAPSTAN_JWT_ISSUER: `${restUrl}/`,
      CAPSTAN_JWKS_URL: `${restUrl}/.well-known/jwks.json`,
      CAPSTAN_LINK_BASE_URL: restUrl,
      // Spans of the handlers and workers, one JSON line each (X-Ray's place in AWS).
      CAPSTAN_TRACE_FILE: join(options.stateDir, 'traces.jsonl'),
      // Approval and incident alerts go to the demo service's chat webhook unless told otherwise.
      CAPSTAN_NOTIFY_WEBHOOK_URL: `http://127.0.0.1:${port + 8}/hooks/notify`,
      POWERTOOLS_LOG_LEVEL: process.env.POWERTOOLS_LOG_LEVEL ?? 'WARN',
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_TRACE_ENABLED: 'false',
      CAPSTAN_RECONCILE_SWEEPS: '1',
      // The functions share this process and DynamoDB Local serves one request at a time: with four
      // sockets, a burst of their requests queues here, not ahead of every worker's lease.
      CAPSTAN_DYNAMODB_MAX_SOCKETS: process.env.CAPSTAN_DYNAMODB_MAX_SOCKETS ?? '4',
      // The development identities' main tenant runs this deployment (README: Workers).
      CAPSTAN_PLATFORM_TENANT: process.env.CAPSTAN_PLATFORM_TENANT ?? 'local',
      ...options.env,
    };
    // Ticket routing, checked before anything can receive a ticket (docs/intake.md).
    const routes = await prepareRoutes(env.CAPSTAN_ROUTES ?? process.env.CAPSTAN_ROUTES, {
      dynamoEndpoint: dynamo.endpoint,
      stateTable: LOCAL_NAMES.tables.state,
      defaultTenant: env.CAPSTAN_PLATFORM_TENANT ?? 'local',
    });
    if (routes !== undefined) env.CAPSTAN_ROUTES = routes;
    Object.assign(process.env, env);

    const invoke = (name: string, event: unknown) => invokeLocal(name, event, PREFIX);
    const functionArn = (name: string) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${PREFIX}-${name}`;
    const stepFunctions = new LocalStepFunctions({
      port: port + 3,
      stateMachineArn: LOCAL_NAMES.stateMachineArn,
      definition: substituteDefinition(
        loadRunInterpreterDefinition(),
        Object.fromEntries(
          Object.entries(DEFINITION_FUNCTIONS).map(([placeholder, name]) => [placeholder, functionArn(name)]),
        ) as Record<DefinitionPlaceholder, string>,
      ),
      invoke,
      dataFile: join(dataDir, 'stepfunctions', 'executions.json'),
      log,
      onWait: (state, payload) => {
        // An operator watching the log learns that a run waits on people, and how to decide.
        const parsed = waitingTaskInputSchema.safeParse(payload);
        if (!parsed.success || parsed.data.decision.action !== 'await_approval') return;
        const { runId } = parsed.data;
        const { approvalId, requiredApprovals, stepId } = parsed.data.decision;
        log(
          `run ${runId} waits for approval ${approvalId} (step ${stepId}, ${requiredApprovals} approver(s)); decide: ` +
            `npx capstan approve ${runId} ${approvalId} --as approver (or reject ... --notes "<why>")`,
        );
      },
    });
    const ticketIngest = asyncTarget({
      invoke: (event) => invoke('ticket-ingest', event),
      deadLetterFile: join(dataDir, 'ticket-ingest-dlq.jsonl'),
      log,
    });
    const services: JsonService[] = [
      await startLocalSecrets({
        port: port + 4,
        file: join(options.stateDir, 'secrets.json'),
        exampleFile: join(ROOT, 'local', 'secrets.example.json'),
        region: REGION,
      }),
      await startLocalEventBridge({
        port: port + 5,
        logFile: join(dataDir, 'eventbridge.jsonl'),
        // The ticket rule of the CDK stack: Ticket events go to the ingest function.
        onEvent: (event) => {
          if (isTicketEvent(event)) ticketIngest.send(lambdaEnvelope(event, REGION, ACCOUNT));
        },
      }),
      // The evidence key lives beside the issuer key, outside data/: a fresh start keeps it, so old bundles still verify.
      await startLocalKms({
        port: port + 9,
        keyFile: join(options.stateDir, 'evidence-key.pem'),
        region: REGION,
        account: ACCOUNT,
        alias: LOCAL_NAMES.evidenceKeyAlias,
      }),
    ];
    cleanups.push(async () => {
      for (const service of services) await service.close();
      await ticketIngest.drain();
    });
    const demo = await startDemoService(port + 8);
    cleanups.push(() => demo.close());

    const issuer = await makeLocalIssuer(join(options.stateDir, 'issuer-key.json'), `${restUrl}/`, 'capstan');
    // Imported after the environment is set: handlers read their configuration at cold start.
    const { handler: authorizeIn } = await import('../functions/authorizer.js');
    const authorizer = (event: APIGatewayRequestAuthorizerEvent): Promise<APIGatewayAuthorizerResult> =>
      authorizeIn(event, lambdaContext('authorizer'));
    const gateway: Gateway = await startGateway({
      port,
      authorizer,
      invoke,
      log,
      staticJson: { '/.well-known/jwks.json': issuer.jwks },
      console: {
        dir: ensureConsoleBuilt(),
        json: {
          '/config.json': {
            apiUrl: `${restUrl}/v1`,
            wsUrl: `ws://127.0.0.1:${port}${WEBSOCKET_PATH}`,
            auth: { mode: 'local', identitiesUrl: LOCAL_IDENTITIES_PATH },
          },
          // Only the local gateway offers these: in AWS the console signs in with the issuer.
          [LOCAL_IDENTITIES_PATH]: {
            identities: Object.entries(LOCAL_IDENTITIES).map(([name, identity]) => ({
              name,
              ...identity,
              token: issuer.tokens[name],
            })),
          },
        },
      },
    });
    cleanups.push(() => gateway.close());
    if (options.demoNodes) await declareDemoNodes(`${restUrl}/v1`, issuer.tokens.admin ?? '', demo.url);

    const resumedExecutions = await stepFunctions.start();
    cleanups.push(() => stepFunctions.stop());

    // The event log's stream feeds three functions, as in AWS: the live stream's broadcaster,
    // lifecycle events out on the bus, and the admitter, which hears of runs ending and admits
    // throttled and waiting runs. One reader serves the three (see `StreamMapping`).
    const eventStream = new StreamMapping({
      endpoint: dynamo.endpoint,
      region: REGION,
      tableName: LOCAL_NAMES.tables.events,
      consumers: [
        {
          name: 'broadcaster',
          handler: (event: DynamoDBStreamEvent) => invoke('broadcaster', event),
          checkpointFile: join(dataDir, 'streams', 'events.json'),
        },
        {
          name: 'lifecycle-publisher',
          handler: (event: DynamoDBStreamEvent) => invoke('lifecycle-publisher', event),
          checkpointFile: join(dataDir, 'streams', 'lifecycle.json'),
        },
        {
          name: 'admitter',
          handler: (event: DynamoDBStreamEvent) => invoke('admitter', event),
          checkpointFile: join(dataDir, 'streams', 'admitter.json'),
        },
      ],
      log,
    });
    await eventStream.start();
    cleanups.push(() => eventStream.stop());
    // Its schedule: what time makes eligible (windows, throttles, cooldowns).
    let admitting = false;
    const admitTick = setInterval(() => {
      if (admitting) return;
      admitting = true;
      invoke('admitter', {})
        .catch((error: unknown) => log(`admitter failed: ${(error as Error).message}`))
        .finally(() => (admitting = false));
    }, options.admitIntervalMs ?? 2_000);
    cleanups.push(() => clearInterval(admitTick));

    // The schedule invokes the reconciler; locally one sweep per tick, never two at once.
    let reconciling = false;
    const reconcile = setInterval(() => {
      if (reconciling) return;
      reconciling = true;
      invoke('reconciler', {
        version: '0',
        id: crypto.randomUUID(),
        'detail-type': 'Scheduled Event',
        source: 'aws.events',
        account: ACCOUNT,
        time: new Date().toISOString(),
        region: REGION,
        resources: [`arn:aws:events:${REGION}:${ACCOUNT}:rule/${PREFIX}-reconcile`],
        detail: {},
      })
        .then((summary) => {
          const counts = Object.entries(summary as Record<string, number>).filter(([, n]) => n > 0);
          if (counts.length > 0) log(`reconciler: ${counts.map(([k, n]) => `${k}=${n}`).join(' ')}`);
        })
        .catch((error: unknown) => log(`reconciler failed: ${(error as Error).message}`))
        .finally(() => (reconciling = false));
    }, options.reconcileIntervalMs);
    cleanups.push(() => clearInterval(reconcile));

    workers = new WorkerPool({
      entrypoint: join(ROOT, 'worker-container', 'main.ts'),
      counts: options.workers,
      ...(options.agents && { agents: options.agents }),
      env: workerEnv({ ...(process.env as Record<string, string>), ...env }),
      log,
      // Locally the supervisor is the platform that sees a worker die: it reports the exit the way
      // EventBridge reports a stopped ECS task, to the same handler.
      onDeath: ({ pid, how }) =>
        void invoke('worker-stopped', {
          version: '0',
          id: crypto.randomUUID(),
          'detail-type': 'Worker Process Exited',
          source: 'capstan.local',
          account: ACCOUNT,
          time: new Date().toISOString(),
          region: REGION,
          resources: [],
          detail: { hostname: hostname(), pid, how },
        })
          .then((result) => log(`worker ${pid} ${how}: ${JSON.stringify(result)}`))
          .catch((error: unknown) => log(`worker-stopped failed: ${(error as Error).message}`)),
    });
    const pool = workers;
    pool.start();
    cleanups.push(() => pool.stop());
    let scaler: Scaler | undefined;
    if (options.autoscale) {
      const running = startLocalScaler({
        pool,
        queueEndpoint,
        region: REGION,
        prefix: PREFIX,
        capacity: parseConfig(env).CAPSTAN_CAPACITY,
        ...(options.autoscale.intervalMs !== undefined && { intervalMs: options.autoscale.intervalMs }),
        log,
      });
      scaler = running;
      // Before the pool stops: a scale-in must not start while the workers drain for shutdown.
      cleanups.push(() => running.stop());
    }

    const localFile = join(options.stateDir, 'local.json');
    const wsUrl = `ws://127.0.0.1:${port}${WEBSOCKET_PATH}`;
    writeFileSync(
      localFile,
      `${JSON.stringify({ restUrl: `${restUrl}/v1`, wsUrl, tokens: issuer.tokens }, null, 2)}\n`,
      {
        mode: 0o600,
      },
    );

    return {
      restUrl: `${restUrl}/v1`,
      wsUrl,
      localFile,
      endpoints,
      issuer,
      workers: pool,
      ...(scaler ? { scaler } : {}),
      stepFunctions,
      resumedExecutions,
      demo,
      ...(meters ? { meters } : {}),
      dynamoDbPid: dynamo.process.pid,
      stop,
      kill,
    };
  } catch (error) {
    kill();
    await stop();
    throw error;
  }
}

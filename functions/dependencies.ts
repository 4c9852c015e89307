import { systemClock } from '../shared/app/ports.js';
import { Logger } from '@aws-lambda-powertools/logger';
import { makeApprovalAlerts } from '../shared/adapters/approval-alerts.js';
import {
  connectionsClient,
  eventBridgeClient,
  secretsClient,
  sfnClient,
  sqsClient,
} from '../shared/adapters/aws-clients.js';
import { makeDynamoIntakeLog, makeDynamoWebhookNonces } from '../shared/adapters/dynamodb/intake-store.js';
import { makeEventBridgeLifecycleBus } from '../shared/adapters/lifecycle-bus.js';
import { makeSecretsManagerSource } from '../shared/adapters/secrets.js';
import { makeSecretWebhookKeys } from '../shared/adapters/webhook-keys.js';
import { makeIngestTicket } from '../shared/app/intake.js';
import { makeCreateRun } from '../shared/app/runs.js';
import { EMPTY_ROUTES, parseRoutes } from '../shared/domain/intake/routing.js';
import { makeApprovalStore } from '../shared/adapters/dynamodb/approval-store.js';
import { SANDBOX_PROFILE_NAMES } from '../shared/domain/sandbox-profiles.js';
import { makeConnectionPoster } from '../shared/adapters/connection-poster.js';
import { makeConnectionStore, makeSubscriptionStore } from '../shared/adapters/dynamodb/connection-store.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeDynamoRunbookStore } from '../shared/adapters/dynamodb/runbook-store.js';
import { makeRunStore } from '../shared/adapters/dynamodb/run-store.js';
import { makeSfnCallbacks, makeSfnInterpreterControl, makeSfnRunStarter } from '../shared/adapters/sfn.js';
import { makeWorkerStore } from '../shared/adapters/dynamodb/worker-store.js';
import { makeDynamoInventoryStore } from '../shared/adapters/dynamodb/inventory-store.js';
import { makeSqsCommandQueue } from '../shared/adapters/sqs/command-queue.js';
import { cachingVersions } from '../shared/app/runbook-cache.js';
import { capacityOf, config, required } from '../shared/config.js';
import { kmsClient, s3Client } from '../shared/adapters/aws-clients.js';
import { makeKmsSigner } from '../shared/adapters/kms-signer.js';
import { makeS3EvidenceObjects } from '../shared/adapters/s3/evidence-store.js';
import { makeBundleIndex } from '../shared/adapters/dynamodb/bundle-index.js';
import { DEFAULT_POLICY } from '../shared/domain/policy.js';
import { parsePolicy } from '../shared/domain/policy.js';
import { recordBreakerState, recordMetric } from '../shared/observability/metrics.js';
import { makeControlLog } from '../shared/app/admission-controls.js';
import { makeDynamoAdmissionStore } from '../shared/adapters/dynamodb/admission-store.js';
import { makeAdmission } from '../shared/app/admission.js';
import { makeBackpressure } from '../shared/app/backpressure.js';
import { makeSqsQueueDepth, makeSqsQueueDepths } from '../shared/adapters/sqs/queue-depth.js';
import { makeIncidents } from '../shared/app/incidents.js';
import { makeIncidentAlerts } from '../shared/adapters/incident-alerts.js';
import { BREAKER_DEFAULTS } from '../shared/domain/admission/breaker.js';

/** Ports wired to AWS, built once per process and shared by the handlers. */
export const runbookDeps = {
  runbooks: cachingVersions(makeDynamoRunbookStore(documentClient, config().CAPSTAN_STATE_TABLE)),
  clock: systemClock,
};

let runStore: ReturnType<typeof makeRunStore> | undefined;
const runs = () =>
  (runStore ??= makeRunStore(documentClient, {
    state: config().CAPSTAN_STATE_TABLE,
    events: config().CAPSTAN_EVENTS_TABLE,
    environment: config().CAPSTAN_ENVIRONMENT,
  }));

const approvals = () => makeApprovalStore(documentClient, config().CAPSTAN_STATE_TABLE);

/** Incidents: raised on failed runs of escalating runbooks and on breaker openings, told to the notify webhook. */
export const incidents = () => {
  const logger = new Logger({ serviceName: 'capstan-incidents' });
  return makeIncidents({
    runs: runs(),
    runbooks: runbookDeps.runbooks,
    clock: systemClock,
    alerts: makeIncidentAlerts({
      eventBridge: eventBridgeClient(),
      busName: config().CAPSTAN_EVENT_BUS,
      webhookUrl: config().CAPSTAN_NOTIFY_WEBHOOK_URL,
      linkBase: config().CAPSTAN_LINK_BASE_URL,
      log: (message, fields) => logger.warn(message, fields),
    }),
  });
};

/** The admission store, built once per process. */
export const admissionStore = () => makeDynamoAdmissionStore(documentClient, config().CAPSTAN_STATE_TABLE);

let backpressure: ReturnType<typeof makeBackpressure> | undefined;
/** Backpressure on the profile queues, bounded per profile by `CAPSTAN_CAPACITY`. */
const profileBackpressure = () =>
  (backpressure ??= makeBackpressure({
    depth: makeSqsQueueDepth(sqsClient(), config().CAPSTAN_PREFIX),
    runbooks: runbookDeps.runbooks,
    maxBacklog: (profile) => capacityOf(config().CAPSTAN_CAPACITY, profile).maxBacklog,
  }));

/** Admission wired to AWS: quotas, limits, breakers, dependencies in the state table, and queue backpressure. */
export const admission = () => {
  const raise = incidents();
  return makeAdmission({
    backpressure: profileBackpressure(),
    runs: runs(),
    admission: admissionStore(),
    starter: makeSfnRunStarter(sfnClient(), required('CAPSTAN_STATE_MACHINE_ARN')),
    clock: systemClock,
    refused: (limit, tenantId) => recordMetric('quotaExceeded', 1, { tenantId, limit }),
    breaker: { ...BREAKER_DEFAULTS, cooldownMs: config().CAPSTAN_BREAKER_COOLDOWN_SECONDS * 1000 },
    breakerChanged: async ({ runbookId, state, runId }) => {
      recordBreakerState(runbookId, state);
      if (state === 'open') await raise.raise(runId, { kind: 'breaker_opened', runbookId });
    },
  });
};

/** For the quota, limit and breaker routes. */
export const controlDeps = () => ({ admission: admissionStore(), clock: systemClock });

/** For the run routes: also starts interpreter executions. */
export const runDeps = () => ({
  ...runbookDeps,
  runs: runs(),
  starter: makeSfnRunStarter(sfnClient(), required('CAPSTAN_STATE_MACHINE_ARN')),
  callbacks: makeSfnCallbacks(sfnClient()),
  approvals: approvals(),
  admission: admission(),
});

/** For the interpreter's tasks: also sends commands, resumes tasks, and keeps approval gates. */
export const interpreterDeps = () => ({
  ...runbookDeps,
  runs: runs(),
  approvals: approvals(),
  queue: makeSqsCommandQueue(sqsClient(), config().CAPSTAN_PREFIX),
  callbacks: makeSfnCallbacks(sfnClient()),
});

const approvalAlerts = () => {
  const logger = new Logger({ serviceName: 'capstan-approval-alerts' });
  return makeApprovalAlerts({
    eventBridge: eventBridgeClient(),
    busName: config().CAPSTAN_EVENT_BUS,
    webhookUrl: config().CAPSTAN_NOTIFY_WEBHOOK_URL,
    linkBase: config().CAPSTAN_LINK_BASE_URL,
    log: (message, fields) => logger.warn(message, fields),
  });
};

/** For Plan: also the deployment's policy and the alerts that tell people about gates. */
export const planDeps = () => ({
  ...interpreterDeps(),
  policy: parsePolicy(config().CAPSTAN_POLICY),
  alerts: approvalAlerts(),
});

/** For the approval and resume routes: decisions, and the waiting tasks they resume. */
export const approvalDeps = () => ({
  runs: runs(),
  approvals: approvals(),
  callbacks: makeSfnCallbacks(sfnClient()),
  clock: systemClock,
});

/** For the WebSocket routes and the broadcaster. */
export const liveStreamDeps = () => {
  const connections = makeConnectionStore(documentClient, config().CAPSTAN_CONNECTIONS_TABLE);
  return {
    runs: runs(),
    subscriptions: makeSubscriptionStore(documentClient, config().CAPSTAN_CONNECTIONS_TABLE),
    poster: makeConnectionPoster(connectionsClient(), connections),
    clock: systemClock,
  };
};

/** For the worker routes. */
export const workerDeps = () => ({
  workers: makeWorkerStore(documentClient, config().CAPSTAN_STATE_TABLE),
  clock: systemClock,
  heartbeatMs: config().CAPSTAN_WORKER_HEARTBEAT_SECONDS * 1000,
  platformTenant: config().CAPSTAN_PLATFORM_TENANT,
});

/** The tenants' inventory in the state table; Dispatch reads it through `InventoryReader`. */
export const inventoryStore = () =>
  makeDynamoInventoryStore(documentClient, config().CAPSTAN_STATE_TABLE, {
    clock: systemClock,
    heartbeatMs: config().CAPSTAN_WORKER_HEARTBEAT_SECONDS * 1000,
  });

/** For the inventory routes. */
export const inventoryDeps = () => ({ inventory: inventoryStore(), clock: systemClock });

/** For the dashboard's figures: the run and approval stores, the worker registry and the profile queues. */
export const dashboardDeps = () => ({
  ...workerDeps(),
  runs: runs(),
  approvals: approvals(),
  queues: makeSqsQueueDepths(sqsClient(), config().CAPSTAN_PREFIX, SANDBOX_PROFILE_NAMES),
});

/** For the reconciler: the interpreter's ports, the worker registry, and the state machine itself. */
export const reconcilerDeps = () => {
  const admitter = admission();
  return {
    ...interpreterDeps(),
    ...workerDeps(),
    interpreter: makeSfnInterpreterControl(sfnClient(), required('CAPSTAN_STATE_MACHINE_ARN')),
    alerts: approvalAlerts(),
    inventory: inventoryStore(),
    settleWaiting: admitter.settleDependencies,
    noteBacklog: admitter.noteBacklog,
  };
};

const intakeLogger = () => new Logger({ serviceName: 'capstan-intake' });

/** For ticket intake (EventBridge and webhooks): the routing document and the create-run use case. */
export const intakeDeps = () => {
  const logger = intakeLogger();
  const routesText = config().CAPSTAN_ROUTES;
  const routes = routesText === undefined ? EMPTY_ROUTES : parseRoutes(routesText);
  const intake = makeDynamoIntakeLog(documentClient, config().CAPSTAN_STATE_TABLE);
  const ingest = makeIngestTicket({
    routes,
    defaultTenant: config().CAPSTAN_PLATFORM_TENANT,
    createRun: makeCreateRun(runDeps()),
    intake,
    clock: systemClock,
    log: (message, fields) => logger.warn(message, fields),
  });
  return {
    routes,
    ingest,
    intake,
    clock: systemClock,
    platformTenant: config().CAPSTAN_PLATFORM_TENANT,
    keys: makeSecretWebhookKeys(makeSecretsManagerSource(secretsClient()), config().CAPSTAN_PREFIX),
    nonces: makeDynamoWebhookNonces(documentClient, config().CAPSTAN_STATE_TABLE),
  };
};

/** For the lifecycle publisher: the bus and the runs it reads tickets from. */
export const lifecycleDeps = () => {
  const logger = new Logger({ serviceName: 'capstan-lifecycle' });
  return {
    bus: makeEventBridgeLifecycleBus(eventBridgeClient(), config().CAPSTAN_EVENT_BUS),
    runs: runs(),
    log: (message: string, fields: Record<string, unknown>) => logger.warn(message, fields),
  };
};

/** For the evidence, export and artifact routes: the stores read, the evidence bucket and the signing key. */
export const evidenceDeps = () => {
  const policy = parsePolicy(config().CAPSTAN_POLICY);
  return {
    runs: runs(),
    approvals: approvals(),
    runbooks: runbookDeps.runbooks,
    objects: makeS3EvidenceObjects(s3Client(), required('CAPSTAN_EVIDENCE_BUCKET')),
    index: makeBundleIndex(documentClient, config().CAPSTAN_STATE_TABLE),
    signer: makeKmsSigner(kmsClient(), required('CAPSTAN_EVIDENCE_KEY_ID')),
    // Plan denies every step under a policy that does not load; a replay of its decisions needs no document.
    policy: policy instanceof Error ? DEFAULT_POLICY : policy,
    clock: systemClock,
    controls: makeControlLog(admissionStore()),
  };
};

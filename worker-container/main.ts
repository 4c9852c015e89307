import { hostname } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../shared/app/ports.js';
import { makeRecoverLost } from '../shared/app/recovery.js';
import { makeStepResults } from '../shared/app/step-results.js';
import { Later } from '../shared/app/later.js';
import {
  ecsClient,
  lambdaClient,
  s3Client,
  secretsClient,
  sfnClient,
  sqsClient,
  ssmClient,
} from '../shared/adapters/aws-clients.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeCounters } from '../shared/adapters/dynamodb/counters.js';
import { makeRunStore } from '../shared/adapters/dynamodb/run-store.js';
import { makeWorkerStore } from '../shared/adapters/dynamodb/worker-store.js';
import { makeDynamoInventoryStore } from '../shared/adapters/dynamodb/inventory-store.js';
import { ensureNodeQueue } from '../shared/adapters/sqs/node-queues.js';
import { makeAgentNode } from '../shared/app/inventory.js';
import { groupNameSchema } from '../shared/domain/inventory.js';
import type { AgentNode } from '../shared/app/worker-ports.js';
import { makeS3EvidenceObjects } from '../shared/adapters/s3/evidence-store.js';
import { makeSecretsManagerSource } from '../shared/adapters/secrets.js';
import { makeSfnCallbacks } from '../shared/adapters/sfn.js';
import { makeQueueUrls } from '../shared/adapters/sqs/command-queue.js';
import { makeSqsCommandSource } from '../shared/adapters/sqs/command-source.js';
import { makeAwsActions } from '../shared/adapters/aws/actions.js';
import { ecsTaskArn } from '../shared/adapters/ecs-task-metadata.js';
import { capacityOf, workerConfig } from '../shared/config.js';
import { DEFAULT_REDACTION_PATTERNS, parsePatterns } from '../shared/domain/redaction.js';
import { SANDBOX_PROFILES } from '../shared/domain/sandbox-profiles.js';
import { LEASE_HEARTBEATS } from '../shared/domain/workers.js';
import { priorityQueueName, stepQueueName } from '../shared/resources/queues.js';
import { makeAwsBackend } from './backends/aws.js';
import { makeHttpBackend } from './backends/http.js';
import { makeNotifyBackend } from './backends/notify.js';
import { makeScriptBackend } from './backends/script.js';
import { makeTestBackend } from './backends/test.js';
import { makeArtifactStore } from './artifacts.js';
import { Worker } from './worker.js';
import { makeFanout } from '../shared/app/fanout.js';
import { cachingVersions } from '../shared/app/runbook-cache.js';
import { makeDynamoRunbookStore } from '../shared/adapters/dynamodb/runbook-store.js';
import { makeSqsCommandQueue } from '../shared/adapters/sqs/command-queue.js';
import { makeLogger, withContextFields } from '../shared/observability/logger.js';
import { recordMetric, setMetricsService } from '../shared/observability/metrics.js';
import { fileSpanSink, xrayDaemonSink } from '../shared/observability/span-sinks.js';
import { configureTracing } from '../shared/observability/tracing.js';

async function main(): Promise<void> {
  const env = workerConfig();
  const { CAPSTAN_PREFIX, CAPSTAN_STATE_TABLE, CAPSTAN_EVENTS_TABLE, CAPSTAN_WORKER_HEARTBEAT_SECONDS } = env;
  const profile = SANDBOX_PROFILES[env.CAPSTAN_SANDBOX_PROFILE];
  const workerId = `${env.CAPSTAN_WORKER_NAME ?? profile.name}-${hostname()}-${process.pid}`;
  const logger = makeLogger('capstan-worker', { workerId, sandboxProfile: profile.name });
  setMetricsService('capstan-worker');
  // Locally a file beside the stack's state; on Fargate the X-Ray daemon sidecar (docs/observability.md).
  const spanSink = env.CAPSTAN_TRACE_FILE
    ? fileSpanSink(env.CAPSTAN_TRACE_FILE)
    : env.AWS_XRAY_DAEMON_ADDRESS
      ? xrayDaemonSink(env.AWS_XRAY_DAEMON_ADDRESS)
      : undefined;
  if (spanSink) configureTracing({ sink: spanSink, service: 'capstan-worker' });
  const runs = makeRunStore(documentClient, {
    state: CAPSTAN_STATE_TABLE,
    events: CAPSTAN_EVENTS_TABLE,
    environment: env.CAPSTAN_ENVIRONMENT,
  });
  const callbacks = makeSfnCallbacks(sfnClient());
  const heartbeatMs = CAPSTAN_WORKER_HEARTBEAT_SECONDS * 1000;
  const slots = capacityOf(env.CAPSTAN_CAPACITY, profile.name).stepsPerWorker;
  // A result may start a fan-out unit's next targets, or a pipeline target's next sub-step.
  const fanout = makeFanout({
    runs,
    runbooks: cachingVersions(makeDynamoRunbookStore(documentClient, CAPSTAN_STATE_TABLE)),
    queue: makeSqsCommandQueue(sqsClient(), CAPSTAN_PREFIX),
    callbacks,
    clock: systemClock,
    inventory: makeDynamoInventoryStore(documentClient, CAPSTAN_STATE_TABLE, { clock: systemClock, heartbeatMs }),
  });
  // A result's resume and a command's delete finish while the worker takes its next command.
  const later = new Later((what, error) => logger.warn(`${what} failed`, withContextFields({ error: error.message })));
  const results = makeStepResults({ runs, callbacks, clock: systemClock, fanout, later });
  const groups = env.CAPSTAN_WORKER_GROUPS.split(',')
    .map((g) => g.trim())
    .filter(Boolean);
  const node = agentNodeOf(env, workerId, groups, heartbeatMs);
  // An agent receives from its node's own queue only: the commands addressed to that node.
  const queueUrl = node
    ? await ensureNodeQueue(sqsClient(), { prefix: CAPSTAN_PREFIX, tenantId: node.tenantId, nodeId: node.id, profile })
    : await makeQueueUrls(sqsClient())(stepQueueName(CAPSTAN_PREFIX, profile.name));
  // A profile worker takes `high` and `emergency` runs' commands first; an agent's queue is its own.
  const priorityQueueUrl = node
    ? undefined
    : await makeQueueUrls(sqsClient())(priorityQueueName(CAPSTAN_PREFIX, profile.name));
  const taskArn = await ecsTaskArn(env.ECS_CONTAINER_METADATA_URI_V4);
  const backends = [
    makeTestBackend(makeCounters(documentClient, CAPSTAN_STATE_TABLE), (key) => {
      const prefix = env.CAPSTAN_TEST_CRASH_AFTER_COUNTER;
      if (prefix !== undefined && key.startsWith(prefix)) process.kill(process.pid, 'SIGKILL');
    }),
    makeHttpBackend(),
    makeScriptBackend({ directory: env.CAPSTAN_SCRIPTS_DIR ?? join(import.meta.dirname, 'scripts') }),
    makeAwsBackend(
      makeAwsActions({ ecs: ecsClient(), ssm: ssmClient(), lambda: lambdaClient(), secretsManager: secretsClient() }),
    ),
    makeNotifyBackend(),
  ];

  let stops = 0;
  const stop = (reason: string) => {
    stops++;
    if (stops > 1) {
      // A second signal: give up the current step now and release its lease for the reconciler.
      logger.warn('stopping at once', { reason });
      // Steps that ended already still resume the interpreter, for a second at most.
      const brief = new Promise((resolve) => setTimeout(resolve, 1000).unref());
      void worker
        .abort()
        .then(() => Promise.race([later.settled(), brief]))
        .finally(() => process.exit(1));
      return;
    }
    logger.info('draining', { reason, busy: worker.busy });
    void worker.stop().then(() => process.exit(0));
  };

  const worker: Worker = new Worker({
    workerId,
    profile: profile.name,
    registration: {
      hostname: hostname(),
      pid: process.pid,
      ...(taskArn !== undefined && { taskArn }),
      environment: profile.environment,
      backends: Object.fromEntries(backends.map((b) => [b.name, Object.keys(b.actions)])),
      groups,
      version: env.CAPSTAN_VERSION,
    },
    workers: makeWorkerStore(documentClient, CAPSTAN_STATE_TABLE),
    ...(node && { agent: node.agent }),
    heartbeatMs,
    leaseMs: LEASE_HEARTBEATS * heartbeatMs,
    slots,
    commands: makeSqsCommandSource(sqsClient(), queueUrl, {
      ...(priorityQueueUrl !== undefined && { priorityQueueUrl }),
    }),
    runs: results.holdingLeases(runs),
    results,
    later,
    recover: makeRecoverLost({ runs, callbacks }),
    backends,
    secrets: makeSecretsManagerSource(secretsClient()),
    ...(env.CAPSTAN_EVIDENCE_BUCKET && {
      artifacts: makeArtifactStore({
        objects: makeS3EvidenceObjects(s3Client(), env.CAPSTAN_EVIDENCE_BUCKET ?? ''),
        maxBytes: env.CAPSTAN_ARTIFACT_MAX_BYTES,
        runs,
        clock: systemClock,
      }),
    }),
    redactPatterns: [...DEFAULT_REDACTION_PATTERNS, ...parsePatterns(env.CAPSTAN_REDACT_PATTERNS)],
    onViolation: (cmd) => {
      recordMetric('sandboxViolations', 1, { sandboxProfile: profile.name, enforcedBy: 'worker' });
      logger.warn(
        'sandbox violation',
        withContextFields({ backend: cmd.backend, action: cmd.action, runId: cmd.runId }),
      );
    },
    onDrainRequested: () => stop('drain requested'),
    log: (message, fields) =>
      fields && 'error' in fields
        ? logger.error(message, withContextFields(fields))
        : logger.info(message, withContextFields(fields)),
  });
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  logger.info('worker started', {
    profile: profile.name,
    queueUrl,
    ...(node && { node: node.id, tenant: node.tenantId }),
    heartbeatSeconds: CAPSTAN_WORKER_HEARTBEAT_SECONDS,
    stepsAtOnce: slots,
  });
  await worker.run();
}

/** The worker's agent node when `CAPSTAN_NODE_ID` is set: in `CAPSTAN_NODE_TENANT`, else the platform tenant. */
function agentNodeOf(
  env: ReturnType<typeof workerConfig>,
  workerId: string,
  groups: string[],
  heartbeatMs: number,
): { id: string; tenantId: string; agent: AgentNode } | undefined {
  if (env.CAPSTAN_NODE_ID === undefined) return undefined;
  const tenantId = env.CAPSTAN_NODE_TENANT ?? env.CAPSTAN_PLATFORM_TENANT;
  if (tenantId === undefined)
    throw new Error('invalid configuration: CAPSTAN_NODE_ID needs CAPSTAN_NODE_TENANT (or CAPSTAN_PLATFORM_TENANT)');
  // The inventory lists what the node registers, so a group it could not list is refused here.
  const badGroup = groups.find((g) => !groupNameSchema.safeParse(g).success);
  if (badGroup !== undefined)
    throw new Error(`invalid configuration: CAPSTAN_WORKER_GROUPS: '${badGroup}' is not a group name`);
  const inventory = makeDynamoInventoryStore(documentClient, env.CAPSTAN_STATE_TABLE, {
    clock: systemClock,
    heartbeatMs,
  });
  const agent = makeAgentNode(
    { inventory, clock: systemClock },
    {
      id: env.CAPSTAN_NODE_ID,
      tenantId,
      groups,
      attributes: { host: hostname(), ...env.CAPSTAN_NODE_ATTRIBUTES },
      workerId,
    },
  );
  return { id: env.CAPSTAN_NODE_ID, tenantId, agent };
}

main().catch((error: unknown) => {
  console.error(`capstan worker: ${(error as Error).message}`);
  process.exit(1);
});

import { hostname } from 'node:os';
import { Logger } from '@aws-lambda-powertools/logger';
import { z } from 'zod';
import { systemClock } from '../shared/app/ports.js';
import { makeStepResults } from '../shared/app/step-results.js';
import { sfnClient, sqsClient } from '../shared/adapters/aws-clients.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeCounters } from '../shared/adapters/dynamodb/counters.js';
import { makeRunStore } from '../shared/adapters/dynamodb/run-store.js';
import { makeSfnCallbacks } from '../shared/adapters/sfn.js';
import { makeQueueUrls } from '../shared/adapters/sqs/command-queue.js';
import { config } from '../shared/config.js';
import { sandboxProfileNameSchema } from '../shared/domain/sandbox-profiles.js';
import { stepQueueName } from '../shared/resources/queues.js';
import { makeTestBackend } from './backends/test.js';
import { Worker } from './worker.js';

const workerEnvSchema = z.object({
  CAPSTAN_SANDBOX_PROFILE: sandboxProfileNameSchema,
  CAPSTAN_WORKER_NAME: z.string().min(1).optional(),
  CAPSTAN_LEASE_SECONDS: z.coerce.number().int().min(5).max(3600).default(60),
});

async function main(): Promise<void> {
  const env = workerEnvSchema.parse(process.env);
  const { CAPSTAN_PREFIX, CAPSTAN_STATE_TABLE, CAPSTAN_EVENTS_TABLE } = config();
  const workerId = `${env.CAPSTAN_WORKER_NAME ?? env.CAPSTAN_SANDBOX_PROFILE}-${hostname()}-${process.pid}`;
  const logger = new Logger({ serviceName: 'capstan-worker', persistentKeys: { workerId } });
  const runs = makeRunStore(documentClient, { state: CAPSTAN_STATE_TABLE, events: CAPSTAN_EVENTS_TABLE });
  const results = makeStepResults({ runs, callbacks: makeSfnCallbacks(sfnClient()), clock: systemClock });
  const queueUrl = await makeQueueUrls(sqsClient())(stepQueueName(CAPSTAN_PREFIX, env.CAPSTAN_SANDBOX_PROFILE));
  const worker = new Worker({
    workerId,
    profile: env.CAPSTAN_SANDBOX_PROFILE,
    queueUrl,
    sqs: sqsClient(),
    runs,
    results,
    backends: [makeTestBackend(makeCounters(documentClient, CAPSTAN_STATE_TABLE))],
    leaseMs: env.CAPSTAN_LEASE_SECONDS * 1000,
    log: (message, fields) =>
      fields && 'error' in fields ? logger.error(message, fields) : logger.info(message, fields ?? {}),
  });

  let stops = 0;
  const stop = (signal: string) => {
    stops++;
    if (stops > 1) {
      // A second signal: give up the current step now; its lease expires and it is recovered.
      logger.warn('stopping at once', { signal });
      worker.abort();
      process.exit(1);
    }
    logger.info('draining', { signal, busy: worker.busy });
    void worker.stop().then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  logger.info('worker started', { profile: env.CAPSTAN_SANDBOX_PROFILE, queueUrl });
  await worker.run();
}

main().catch((error: unknown) => {
  console.error(`capstan worker: ${(error as Error).message}`);
  process.exit(1);
});

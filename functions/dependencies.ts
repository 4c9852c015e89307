import { systemClock } from '../shared/app/ports.js';
import { connectionsClient, sfnClient, sqsClient } from '../shared/adapters/aws-clients.js';
import { makeConnectionPoster } from '../shared/adapters/connection-poster.js';
import { makeConnectionStore, makeSubscriptionStore } from '../shared/adapters/dynamodb/connection-store.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeDynamoRunbookStore } from '../shared/adapters/dynamodb/runbook-store.js';
import { makeRunStore } from '../shared/adapters/dynamodb/run-store.js';
import { makeSfnCallbacks, makeSfnInterpreterControl, makeSfnRunStarter } from '../shared/adapters/sfn.js';
import { makeWorkerStore } from '../shared/adapters/dynamodb/worker-store.js';
import { makeSqsCommandQueue } from '../shared/adapters/sqs/command-queue.js';
import { config, required } from '../shared/config.js';

/** Ports wired to AWS, built once per process and shared by the handlers. */
export const runbookDeps = {
  runbooks: makeDynamoRunbookStore(documentClient, config().CAPSTAN_STATE_TABLE),
  clock: systemClock,
};

let runStore: ReturnType<typeof makeRunStore> | undefined;
const runs = () =>
  (runStore ??= makeRunStore(documentClient, {
    state: config().CAPSTAN_STATE_TABLE,
    events: config().CAPSTAN_EVENTS_TABLE,
  }));

/** For the run routes: also starts interpreter executions. */
export const runDeps = () => ({
  ...runbookDeps,
  runs: runs(),
  starter: makeSfnRunStarter(sfnClient(), required('CAPSTAN_STATE_MACHINE_ARN')),
});

/** For the interpreter's tasks: also sends commands and resumes tasks. */
export const interpreterDeps = () => ({
  ...runbookDeps,
  runs: runs(),
  queue: makeSqsCommandQueue(sqsClient(), config().CAPSTAN_PREFIX),
  callbacks: makeSfnCallbacks(sfnClient()),
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
});

/** For the reconciler: the interpreter's ports, the worker registry, and the state machine itself. */
export const reconcilerDeps = () => ({
  ...interpreterDeps(),
  ...workerDeps(),
  interpreter: makeSfnInterpreterControl(sfnClient(), required('CAPSTAN_STATE_MACHINE_ARN')),
});

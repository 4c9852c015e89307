import { systemClock } from '../shared/app/ports.js';
import { documentClient } from '../shared/adapters/dynamodb/client.js';
import { makeDynamoRunbookStore } from '../shared/adapters/dynamodb/runbook-store.js';
import { config } from '../shared/config.js';

/** Ports wired to AWS, built once per process and shared by the handlers. */
export const runbookDeps = {
  runbooks: makeDynamoRunbookStore(documentClient, config().CAPSTAN_STATE_TABLE),
  clock: systemClock,
};

import { afterAll, beforeAll } from 'vitest';
import type { Stores } from '../contract/run-store.js';
import { runStoreContract } from '../contract/run-store.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

let dynamo: TestDynamo;
let stores: Stores;

beforeAll(async () => {
  dynamo = await startTestDynamo('contract');
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeRunStore } = await import('../../shared/adapters/dynamodb/run-store.js');
  const { makeApprovalStore } = await import('../../shared/adapters/dynamodb/approval-store.js');
  stores = {
    runs: makeRunStore(documentClient, dynamo.tableNames),
    approvals: makeApprovalStore(documentClient, dynamo.tableNames.state),
  };
}, 120_000);

afterAll(async () => {
  await dynamo?.local.stop();
});

runStoreContract('DynamoDB', () => stores);

import { afterAll, beforeAll } from 'vitest';
import type { InventoryStore } from '../../shared/app/ports/inventory.js';
import { inventoryStoreContract } from '../contract/inventory-store.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

let dynamo: TestDynamo;
let store: InventoryStore;
let now = new Date('2026-03-01T00:00:00.000Z');

beforeAll(async () => {
  dynamo = await startTestDynamo('inventory');
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeDynamoInventoryStore } = await import('../../shared/adapters/dynamodb/inventory-store.js');
  store = makeDynamoInventoryStore(documentClient, dynamo.tableNames.state, {
    clock: { now: () => now },
    heartbeatMs: 15_000,
  });
}, 120_000);

afterAll(async () => {
  await dynamo?.local.stop();
});

inventoryStoreContract('DynamoDB', () => ({ store, setNow: (at) => (now = at), heartbeatMs: 15_000 }));

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConnectionStore, SubscriptionStore } from '../../shared/app/ports/connections.js';
import type { Principal } from '../../shared/domain/entities.js';
import { startTestDynamo, type TestDynamo } from '../support/local-dynamodb.js';

let dynamo: TestDynamo;
let subscriptions: SubscriptionStore;
let connections: ConnectionStore;
// Real time: DynamoDB Local deletes items whose TTL has passed.
const now = new Date();
const principal = (tenantId: string): Principal => ({ subject: 'ada', tenantId, roles: ['viewer'] });

beforeAll(async () => {
  dynamo = await startTestDynamo('subscriptions');
  const { documentClient } = await import('../../shared/adapters/dynamodb/client.js');
  const { makeConnectionStore, makeSubscriptionStore } =
    await import('../../shared/adapters/dynamodb/connection-store.js');
  subscriptions = makeSubscriptionStore(documentClient, dynamo.tableNames.connections);
  connections = makeConnectionStore(documentClient, dynamo.tableNames.connections);
}, 120_000);

afterAll(async () => {
  await dynamo?.local.stop();
});

async function subscribe(connectionId: string, tenantId: string, runId: string) {
  await connections.open(connectionId, principal(tenantId), now);
  await subscriptions.subscribe({ connectionId, tenantId, runId, delivered: 0 }, now);
}

/** The subscribers found, as a plain object with each run's connections in order. */
const sorted = (found: Map<string, string[]>): Record<string, string[]> =>
  Object.fromEntries([...found.keys()].sort().map((runId) => [runId, [...(found.get(runId) ?? [])].sort()]));

describe('the DynamoDB subscription store', () => {
  it("finds the subscribers of several runs of one tenant at once, and none of another tenant's", async () => {
    await subscribe('c-a', 'acme', 'run-1');
    await subscribe('c-b', 'acme', 'run-1');
    await subscribe('c-b', 'acme', 'run-2');
    await subscribe('c-x', 'other', 'run-1');

    expect(sorted(await subscriptions.subscribers('acme', ['run-1', 'run-2', 'run-3']))).toEqual({
      'run-1': ['c-a', 'c-b'],
      'run-2': ['c-b'],
    });
    expect(sorted(await subscriptions.subscribers('acme', ['run-2']))).toEqual({ 'run-2': ['c-b'] });
    expect(sorted(await subscriptions.subscribers('other', ['run-1', 'run-2']))).toEqual({ 'run-1': ['c-x'] });
    expect((await subscriptions.subscribers('acme', [])).size).toBe(0);
  });

  it('forgets every subscription of a connection that closes', async () => {
    await subscribe('c-gone', 'closing', 'run-1');
    await subscribe('c-gone', 'closing', 'run-2');
    await subscribe('c-stays', 'closing', 'run-2');

    await connections.remove('c-gone');

    expect(sorted(await subscriptions.subscribers('closing', ['run-1', 'run-2']))).toEqual({ 'run-2': ['c-stays'] });
  });

  it('leaves out a subscription past its time that TTL has not removed yet', async () => {
    const longAgo = new Date(now.getTime() - 3 * 3600_000);
    await connections.open('c-old', principal('aging'), longAgo);
    await subscriptions.subscribe({ connectionId: 'c-old', tenantId: 'aging', runId: 'run-1', delivered: 0 }, longAgo);
    await subscribe('c-new', 'aging', 'run-1');

    expect(sorted(await subscriptions.subscribers('aging', ['run-1', 'run-2']))).toEqual({ 'run-1': ['c-new'] });
    expect(sorted(await subscriptions.subscribers('aging', ['run-1']))).toEqual({ 'run-1': ['c-new'] });
  });
});

import { DeleteCommand, type DynamoDBDocumentClient, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { InventoryStore } from '../../app/ports/inventory.js';
import type { Clock } from '../../app/ports.js';
import { ConflictError } from '../../domain/errors.js';
import { nodeAsOf, type StoredNode, storedNodeSchema } from '../../domain/inventory.js';
import { conditionally, isConditionFailure } from './conditional.js';
import { inventoryKey, nodeSk } from './keys.js';
import { queryPages } from './paginate.js';

const itemSchema = z.object({ node: storedNodeSchema });

/** A silent agent node ages out of the listing a week after it was last seen. */
const expiryOf = (at: Date) => Math.floor(at.getTime() / 1000) + 7 * 86_400;

export interface DynamoInventoryOptions {
  readonly clock: Clock;
  /** The workers' heartbeat interval: an agent silent for three of them shows offline. */
  readonly heartbeatMs: number;
}

/**
 * The inventory in the state table: a tenant's nodes share the partition `TENANT#<id>#NODES`
 * (sort key `NODE#<id>`), so listing is one Query that cannot reach another tenant's nodes, and
 * every write names the tenant in its key. Which source owns a node id is enforced by the
 * writes' conditions: an admin cannot overwrite an agent, nor an agent a declared node.
 */
export function makeDynamoInventoryStore(
  client: DynamoDBDocumentClient,
  tableName: string,
  options: DynamoInventoryOptions,
): InventoryStore {
  const key = (tenantId: string, nodeId: string) => ({ pk: inventoryKey(tenantId), sk: nodeSk(nodeId) });
  const names = { '#n': 'node', '#source': 'source' };

  /** Puts a node unless the other source owns its id. */
  async function putOwned(node: StoredNode, expiresAt?: number): Promise<boolean> {
    try {
      const { Attributes } = await client.send(
        new PutCommand({
          TableName: tableName,
          Item: { ...key(node.tenantId, node.id), node, ...(expiresAt !== undefined && { expiresAt }) },
          ConditionExpression: 'attribute_not_exists(pk) OR #n.#source = :source',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ':source': node.source },
          ReturnValues: 'ALL_OLD',
        }),
      );
      return Attributes === undefined;
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      throw new ConflictError(
        node.source === 'declared'
          ? `node '${node.id}' is an agent node: it describes itself`
          : `node '${node.id}' is declared: remove it before an agent takes it`,
      );
    }
  }

  /** Updates an agent node its worker still holds; false when it does not. */
  const updateAgent = (
    agent: { tenantId: string; id: string; workerId: string },
    update: string,
    values: Record<string, unknown>,
    live: boolean,
  ) =>
    conditionally(async () => {
      await client.send(
        new UpdateCommand({
          TableName: tableName,
          Key: key(agent.tenantId, agent.id),
          UpdateExpression: update,
          ConditionExpression:
            '#n.#source = :agent AND #n.workerId = :worker' +
            (live ? ' AND attribute_not_exists(#n.deregistered)' : ''),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ...values, ':agent': 'agent', ':worker': agent.workerId },
        }),
      );
      return true;
    }, false);

  return {
    async list(tenantId, filter) {
      const now = options.clock.now();
      const group = filter?.group;
      const { items } = await queryPages(
        client,
        {
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ...(group !== undefined && {
            FilterExpression: 'contains(#n.groups, :group)',
            ExpressionAttributeNames: { '#n': 'node' },
          }),
          ExpressionAttributeValues: { ':pk': inventoryKey(tenantId), ...(group !== undefined && { ':group': group }) },
        },
        (item) => itemSchema.parse(item).node,
      );
      // The sort key orders by id already; the tenant check guards against a mis-keyed item.
      return items.filter((n) => n.tenantId === tenantId).map((n) => nodeAsOf(n, now, options.heartbeatMs));
    },

    async declare(declaration, at) {
      const node: StoredNode = { ...declaration, source: 'declared', lastSeen: at.toISOString() };
      const created = await putOwned(node);
      return { node: nodeAsOf(node, at, options.heartbeatMs), created };
    },

    async remove(tenantId, nodeId) {
      return conditionally(async () => {
        await client.send(
          new DeleteCommand({
            TableName: tableName,
            Key: key(tenantId, nodeId),
            ConditionExpression: 'attribute_exists(pk)',
          }),
        );
        return true;
      }, false);
    },

    async registerAgent(agent, at) {
      await putOwned({ ...agent, source: 'agent', lastSeen: at.toISOString() }, expiryOf(at));
    },

    heartbeatAgent(agent, at) {
      return updateAgent(
        agent,
        'SET #n.lastSeen = :at, expiresAt = :exp',
        { ':at': at.toISOString(), ':exp': expiryOf(at) },
        true,
      );
    },

    async deregisterAgent(agent, at) {
      await updateAgent(
        agent,
        'SET #n.lastSeen = :at, #n.deregistered = :yes',
        { ':at': at.toISOString(), ':yes': true },
        false,
      );
    },
  };
}

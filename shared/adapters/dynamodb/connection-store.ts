import {
  ScanCommand,
  BatchWriteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { ConnectionStore, Subscription, SubscriptionStore } from '../../app/ports/connections.js';
import { isConditionFailure } from './conditional.js';
import { queryPages } from './paginate.js';

/** API Gateway closes a WebSocket connection after two hours; its records age out a little later. */
export const CONNECTION_TTL_SECONDS = 2 * 3600 + 600;

export const connectionKey = (connectionId: string) => `CONN#${connectionId}`;
/**
 * The tenant's side of its subscriptions: one partition per tenant, an item per (run, connection),
 * so the broadcaster reads a batch's subscribers with one query per tenant.
 */
export const tenantSubscribersKey = (tenantId: string) => `SUBS#${tenantId}`;
const subscriberSk = (runId: string, connectionId: string) => `${runId}#${connectionKey(connectionId)}`;

export function makeConnectionStore(client: DynamoDBDocumentClient, tableName: string): ConnectionStore {
  return {
    async open(connectionId, principal, now) {
      await client.send(
        new PutCommand({
          TableName: tableName,
          Item: {
            pk: connectionKey(connectionId),
            sk: 'META',
            tenantId: principal.tenantId,
            subject: principal.subject,
            roles: principal.roles,
            connectedAt: now.toISOString(),
            expiresAt: Math.floor(now.getTime() / 1000) + CONNECTION_TTL_SECONDS,
          },
        }),
      );
    },
    async countOpen(now) {
      // A once-a-minute count of a small table that expires its own items: a Scan that returns counts only.
      let count = 0;
      let ExclusiveStartKey: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new ScanCommand({
            TableName: tableName,
            Select: 'COUNT',
            FilterExpression: 'sk = :meta AND expiresAt > :now',
            ExpressionAttributeValues: { ':meta': 'META', ':now': Math.floor(now.getTime() / 1000) },
            ...(ExclusiveStartKey && { ExclusiveStartKey }),
          }),
        );
        count += page.Count ?? 0;
        ExclusiveStartKey = page.LastEvaluatedKey;
      } while (ExclusiveStartKey);
      return count;
    },

    async remove(connectionId) {
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': connectionKey(connectionId) },
        }),
      );
      // The connection's own items, and the run-side index entry of each subscription.
      const keys = Items.flatMap((item) => {
        const own = { pk: item.pk as string, sk: item.sk as string };
        return item.sk === 'META'
          ? [own]
          : [
              own,
              {
                pk: tenantSubscribersKey(item.tenantId as string),
                sk: subscriberSk(item.runId as string, connectionId),
              },
            ];
      });
      for (let i = 0; i < keys.length; i += 25) {
        await client.send(
          new BatchWriteCommand({
            RequestItems: { [tableName]: keys.slice(i, i + 25).map((Key) => ({ DeleteRequest: { Key } })) },
          }),
        );
      }
    },
  };
}

const subSk = (runId: string) => `SUB#${runId}`;

/**
 * Subscriptions of connections to runs, with a per-subscription delivery lock. Whoever holds the
 * lock sends the run's events in order from `delivered`; anyone else who has something to send
 * marks the subscription dirty, and the holder reads the log again before letting go. So a replay
 * and the live stream never send the same event twice, never skip one, and never reorder.
 */
export function makeSubscriptionStore(client: DynamoDBDocumentClient, tableName: string): SubscriptionStore {
  const key = (connectionId: string, runId: string) => ({ pk: connectionKey(connectionId), sk: subSk(runId) });
  return {
    async subscribe(sub: Subscription, now: Date): Promise<void> {
      const expiresAt = Math.floor(now.getTime() / 1000) + CONNECTION_TTL_SECONDS;
      await client.send(
        new BatchWriteCommand({
          RequestItems: {
            [tableName]: [
              {
                PutRequest: {
                  Item: { ...key(sub.connectionId, sub.runId), ...sub, dirty: false, expiresAt },
                },
              },
              {
                PutRequest: {
                  Item: {
                    pk: tenantSubscribersKey(sub.tenantId),
                    sk: subscriberSk(sub.runId, sub.connectionId),
                    runId: sub.runId,
                    connectionId: sub.connectionId,
                    expiresAt,
                  },
                },
              },
            ],
          },
        }),
      );
    },

    async subscribers(tenantId: string, runIds: readonly string[]): Promise<Map<string, string[]>> {
      const wanted = new Set(runIds);
      const found = new Map<string, string[]>();
      if (wanted.size === 0) return found;
      // One run: its own key range. Several: the tenant's whole partition (one item per open
      // subscription, so small), read to its end and filtered here.
      const [only] = runIds;
      const { items } = await queryPages(
        client,
        {
          TableName: tableName,
          KeyConditionExpression: wanted.size === 1 ? 'pk = :pk AND begins_with(sk, :run)' : 'pk = :pk',
          ExpressionAttributeValues: {
            ':pk': tenantSubscribersKey(tenantId),
            ...(wanted.size === 1 && { ':run': `${only}#` }),
          },
          // A subscription written a moment ago must be seen, or its next event would wait.
          ConsistentRead: true,
        },
        (item) => ({
          runId: String(item.runId),
          connectionId: String(item.connectionId),
          expiresAt: Number(item.expiresAt),
        }),
      );
      // Items past their time that TTL has not removed yet belong to connections long gone.
      const nowSeconds = Date.now() / 1000;
      const live = items.filter((item) => !(item.expiresAt <= nowSeconds));
      for (const { runId, connectionId } of live)
        if (wanted.has(runId)) found.set(runId, [...(found.get(runId) ?? []), connectionId]);
      return found;
    },

    /** Takes the delivery lock: 'held' (the caller delivers), 'busy' (marked dirty for the holder), or 'gone'. */
    async lock(connectionId: string, runId: string, owner: string, now: Date): Promise<'held' | 'busy' | 'gone'> {
      for (let attempt = 0; attempt < 10; attempt++) {
        try {
          await client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: key(connectionId, runId),
              UpdateExpression: 'SET lockOwner = :me, lockUntil = :until, dirty = :false',
              ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(lockOwner) OR lockUntil < :now)',
              ExpressionAttributeValues: {
                ':me': owner,
                ':until': now.getTime() + 30_000,
                ':now': now.getTime(),
                ':false': false,
              },
            }),
          );
          return 'held';
        } catch (error) {
          if (!isConditionFailure(error)) throw error;
        }
        try {
          await client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: key(connectionId, runId),
              UpdateExpression: 'SET dirty = :true',
              ConditionExpression: 'attribute_exists(lockOwner) AND lockUntil >= :now',
              ExpressionAttributeValues: { ':true': true, ':now': now.getTime() },
            }),
          );
          return 'busy';
        } catch (error) {
          if (!isConditionFailure(error)) throw error;
          // Released (or gone) between the two calls: try to take it again.
        }
        const { Item } = await client.send(new GetCommand({ TableName: tableName, Key: key(connectionId, runId) }));
        if (!Item) return 'gone';
      }
      return 'busy';
    },

    async delivered(connectionId: string, runId: string): Promise<number | undefined> {
      const { Item } = await client.send(
        new GetCommand({ TableName: tableName, Key: key(connectionId, runId), ConsistentRead: true }),
      );
      return Item === undefined ? undefined : Number(Item.delivered);
    },

    async markDelivered(connectionId: string, runId: string, owner: string, seq: number) {
      try {
        await client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: key(connectionId, runId),
            UpdateExpression: 'SET delivered = :seq',
            ConditionExpression: 'lockOwner = :me',
            ExpressionAttributeValues: { ':seq': seq, ':me': owner },
          }),
        );
        return 'marked';
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
        return 'lost';
      }
    },

    /** Lets go of the lock unless someone marked the subscription dirty; then clears the mark and says so. */
    async unlock(connectionId: string, runId: string, owner: string): Promise<'released' | 'dirty'> {
      try {
        await client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: key(connectionId, runId),
            UpdateExpression: 'REMOVE lockOwner, lockUntil',
            ConditionExpression: 'lockOwner = :me AND dirty = :false',
            ExpressionAttributeValues: { ':me': owner, ':false': false },
          }),
        );
        return 'released';
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
        try {
          await client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: key(connectionId, runId),
              UpdateExpression: 'SET dirty = :false',
              ConditionExpression: 'lockOwner = :me',
              ExpressionAttributeValues: { ':me': owner, ':false': false },
            }),
          );
          return 'dirty';
        } catch (lost) {
          if (!isConditionFailure(lost)) throw lost;
          return 'released';
        }
      }
    },
  };
}
export type { ConnectionStore, Subscription, SubscriptionStore };

import { BatchWriteCommand, type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { Principal } from '../../domain/entities.js';

/** API Gateway closes a WebSocket connection after two hours; its records age out a little later. */
export const CONNECTION_TTL_SECONDS = 2 * 3600 + 600;

export const connectionKey = (connectionId: string) => `CONN#${connectionId}`;
export const runSubscribersKey = (tenantId: string, runId: string) => `RUNSUB#${tenantId}#${runId}`;

export interface ConnectionStore {
  /** Records an authorised connection and who opened it. */
  open(connectionId: string, principal: Principal, now: Date): Promise<void>;
  /** Removes a connection and every subscription it had. */
  remove(connectionId: string): Promise<void>;
}

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
          : [own, { pk: runSubscribersKey(item.tenantId as string, item.runId as string), sk: own.pk }];
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

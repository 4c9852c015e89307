import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';

const counterKey = (key: string) => ({ pk: `COUNTER#${key}`, sk: 'META' });

/** Named counters for the `test` backend's `counter` action: a side effect tests can read. */
export function makeCounters(client: DynamoDBDocumentClient, tableName: string) {
  return {
    async increment(key: string): Promise<number> {
      const { Attributes } = await client.send(
        new UpdateCommand({
          TableName: tableName,
          Key: counterKey(key),
          UpdateExpression: 'ADD #value :one',
          ExpressionAttributeNames: { '#value': 'value' },
          ExpressionAttributeValues: { ':one': 1 },
          ReturnValues: 'UPDATED_NEW',
        }),
      );
      return Number(Attributes?.value ?? 0);
    },
    async read(key: string): Promise<number> {
      const { Item } = await client.send(
        new GetCommand({ TableName: tableName, Key: counterKey(key), ConsistentRead: true }),
      );
      return Number(Item?.value ?? 0);
    },
  };
}
export type Counters = ReturnType<typeof makeCounters>;

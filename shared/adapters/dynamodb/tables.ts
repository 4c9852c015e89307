import {
  CreateTableCommand,
  type CreateTableCommandInput,
  type DynamoDBClient,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import type { TableSpec } from '../../resources/tables.js';
import { dynamoDbClientAt } from '../aws-clients.js';

/** The CreateTable request for a shared table spec: the same keys, indexes and stream the CDK stack declares. */
export function createTableInput(spec: TableSpec, tableName: string): CreateTableCommandInput {
  const keys = [
    spec.partitionKey,
    ...(spec.sortKey ? [spec.sortKey] : []),
    ...spec.globalIndexes.flatMap((i) => [i.partitionKey, ...(i.sortKey ? [i.sortKey] : [])]),
  ];
  const attributes = [...new Map(keys.map((k) => [k.name, k])).values()];
  const keySchema = (pk: TableSpec['partitionKey'], sk?: TableSpec['sortKey']) => [
    { AttributeName: pk.name, KeyType: 'HASH' as const },
    ...(sk ? [{ AttributeName: sk.name, KeyType: 'RANGE' as const }] : []),
  ];
  return {
    TableName: tableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: attributes.map((k) => ({ AttributeName: k.name, AttributeType: k.type })),
    KeySchema: keySchema(spec.partitionKey, spec.sortKey),
    GlobalSecondaryIndexes:
      spec.globalIndexes.length > 0
        ? spec.globalIndexes.map((i) => ({
            IndexName: i.name,
            KeySchema: keySchema(i.partitionKey, i.sortKey),
            Projection: { ProjectionType: 'ALL' },
          }))
        : undefined,
    StreamSpecification: spec.stream ? { StreamEnabled: true, StreamViewType: 'NEW_IMAGE' } : undefined,
  };
}

/** Creates the table unless it exists already; turns TTL on when the spec has one. */
export async function ensureTable(client: DynamoDBClient, spec: TableSpec, tableName: string): Promise<void> {
  try {
    await client.send(new CreateTableCommand(createTableInput(spec, tableName)));
  } catch (error) {
    if (error instanceof ResourceInUseException) return;
    throw error;
  }
  if (spec.ttlAttribute) {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { Enabled: true, AttributeName: spec.ttlAttribute },
      }),
    );
  }
}

/** Creates every Capstan table that does not exist yet at `endpoint`, under the given names. */
export async function ensureTables<K extends string>(
  endpoint: string,
  specs: Readonly<Record<K, TableSpec>>,
  names: Readonly<Record<K, string>>,
): Promise<void> {
  const client = dynamoDbClientAt(endpoint);
  try {
    for (const key of Object.keys(specs) as K[]) await ensureTable(client, specs[key], names[key]);
  } finally {
    client.destroy();
  }
}

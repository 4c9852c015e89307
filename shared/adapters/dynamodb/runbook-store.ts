import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { Page, RunbookHead, RunbookStore } from '../../app/ports.js';
import { type RunbookVersion, runbookVersionSchema } from '../../domain/entities.js';
import { decodeCursor, encodeCursor } from './cursor.js';

const runbookKey = (tenantId: string, runbookId: string) => `TENANT#${tenantId}#RUNBOOK#${runbookId}`;
const versionKey = (version: number) => `V#${String(version).padStart(10, '0')}`;
const listKey = (tenantId: string) => `TENANT#${tenantId}#RUNBOOKS`;

const headItemSchema = z.object({
  runbookId: z.string(),
  latestVersion: z.number(),
  digest: z.string(),
  description: z.string().optional(),
  updatedAt: z.string(),
});
const digestItemSchema = z.object({ version: z.number() });
const versionItemSchema = z.object({ item: runbookVersionSchema });

const toHead = (item: unknown): RunbookHead => {
  const head = headItemSchema.parse(item);
  return { ...head, ...(head.description === undefined ? {} : { description: head.description }) };
};

const VERSION_CACHE_SIZE = 256;

/**
 * Runbook versions in the state table. A version, its digest marker and the runbook head are
 * written in one transaction, each with a condition, so two writers never store the same
 * version number or the same content twice.
 */
export function makeDynamoRunbookStore(client: DynamoDBDocumentClient, tableName: string): RunbookStore {
  // Versions never change once stored, so a warm function keeps the ones it has read.
  const versions = new Map<string, RunbookVersion>();
  const get = async (tenantId: string, runbookId: string, version: number): Promise<RunbookVersion | undefined> => {
    const pk = runbookKey(tenantId, runbookId);
    const cacheKey = `${pk}|${version}`;
    const cached = versions.get(cacheKey);
    if (cached) return cached;
    const { Item } = await client.send(new GetCommand({ TableName: tableName, Key: { pk, sk: versionKey(version) } }));
    if (!Item) return undefined;
    const found = versionItemSchema.parse(Item).item;
    if (versions.size >= VERSION_CACHE_SIZE) versions.delete(versions.keys().next().value ?? '');
    versions.set(cacheKey, found);
    return found;
  };
  return {
    get,
    async findByDigest(tenantId, runbookId, digest) {
      const { Item } = await client.send(
        new GetCommand({ TableName: tableName, Key: { pk: runbookKey(tenantId, runbookId), sk: `DIGEST#${digest}` } }),
      );
      return Item ? get(tenantId, runbookId, digestItemSchema.parse(Item).version) : undefined;
    },
    async head(tenantId, runbookId) {
      const { Item } = await client.send(
        new GetCommand({ TableName: tableName, Key: { pk: runbookKey(tenantId, runbookId), sk: 'HEAD' } }),
      );
      return Item ? toHead(Item) : undefined;
    },
    async putVersion(version, description) {
      const pk = runbookKey(version.tenantId, version.runbookId);
      try {
        await client.send(
          new TransactWriteCommand({
            TransactItems: [
              {
                Put: {
                  TableName: tableName,
                  Item: { pk, sk: versionKey(version.version), item: version },
                  ConditionExpression: 'attribute_not_exists(pk)',
                },
              },
              {
                Put: {
                  TableName: tableName,
                  Item: { pk, sk: `DIGEST#${version.digest}`, version: version.version },
                  ConditionExpression: 'attribute_not_exists(pk)',
                },
              },
              {
                Put: {
                  TableName: tableName,
                  Item: {
                    pk,
                    sk: 'HEAD',
                    gsi1pk: listKey(version.tenantId),
                    gsi1sk: version.runbookId,
                    runbookId: version.runbookId,
                    latestVersion: version.version,
                    digest: version.digest,
                    description,
                    updatedAt: version.createdAt,
                  },
                  ConditionExpression: 'attribute_not_exists(pk) OR latestVersion = :previous',
                  ExpressionAttributeValues: { ':previous': version.version - 1 },
                },
              },
            ],
          }),
        );
        return true;
      } catch (error) {
        if (error instanceof TransactionCanceledException) return false;
        throw error;
      }
    },
    async list(tenantId, limit, cursor): Promise<Page<RunbookHead>> {
      const scope = { keys: ['pk', 'sk', 'gsi1sk'], bound: { gsi1pk: listKey(tenantId) } };
      const { Items = [], LastEvaluatedKey } = await client.send(
        new QueryCommand({
          TableName: tableName,
          IndexName: 'gsi1',
          KeyConditionExpression: 'gsi1pk = :pk',
          ExpressionAttributeValues: { ':pk': listKey(tenantId) },
          Limit: limit,
          ExclusiveStartKey: decodeCursor(cursor, scope),
        }),
      );
      const nextCursor = encodeCursor(LastEvaluatedKey, scope);
      return { items: Items.map(toHead), ...(nextCursor ? { nextCursor } : {}) };
    },
  };
}

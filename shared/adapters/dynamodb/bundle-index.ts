import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { BundleIndex } from '../../app/evidence-ports.js';
import { runKey } from './keys.js';

const recordSchema = z.object({ key: z.string(), sha256: z.string(), createdAt: z.string() });

/** A run's bundle record, in the run's partition (`EVIDENCE`), written once. */
export function makeBundleIndex(client: DynamoDBDocumentClient, table: string): BundleIndex {
  return {
    async find(runId) {
      const { Item } = await client.send(
        new GetCommand({ TableName: table, Key: { pk: runKey(runId), sk: 'EVIDENCE' }, ConsistentRead: true }),
      );
      return Item ? recordSchema.parse(Item.bundle) : undefined;
    },
    async record(runId, bundle) {
      try {
        await client.send(
          new PutCommand({
            TableName: table,
            Item: { pk: runKey(runId), sk: 'EVIDENCE', bundle },
            ConditionExpression: 'attribute_not_exists(pk)',
          }),
        );
        return true;
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException) return false;
        throw error;
      }
    },
  };
}

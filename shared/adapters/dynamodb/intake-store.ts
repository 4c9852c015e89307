import { DeleteCommand, type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { IntakeLog, IntakeRecord, WebhookNonces } from '../../app/intake.js';
import { sha256Hex } from '../../domain/canonical.js';
import { conditionally } from './conditional.js';
import { decodeCursor, encodeCursor } from './cursor.js';

/** Ticket events that started no run, newest first; kept 30 days. */
const UNROUTED = 'INTAKE#UNROUTED';
const KEEP_SECONDS = 30 * 86_400;

const recordSchema = z.object({
  at: z.string(),
  via: z.enum(['api', 'eventbridge', 'webhook']),
  source: z.string(),
  ticketId: z.string(),
  ticketType: z.string(),
  priority: z.string().optional(),
  reason: z.enum(['unmatched', 'unknown_runbook', 'missing_values', 'active_run', 'conflict']),
  message: z.string(),
  ruleId: z.string().optional(),
  tenantId: z.string().optional(),
  activeRunId: z.string().optional(),
});

/** The intake log in the state table. */
export function makeDynamoIntakeLog(client: DynamoDBDocumentClient, table: string): IntakeLog {
  return {
    async record(entry: IntakeRecord) {
      await client.send(
        new PutCommand({
          TableName: table,
          Item: {
            pk: UNROUTED,
            sk: `${entry.at}#${crypto.randomUUID()}`,
            record: entry,
            expiresAt: Math.floor(Date.parse(entry.at) / 1000) + KEEP_SECONDS,
          },
        }),
      );
    },
    async list(limit, cursor) {
      const scope = { keys: ['sk'], bound: { pk: UNROUTED } };
      const page = await client.send(
        new QueryCommand({
          TableName: table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': UNROUTED },
          ScanIndexForward: false,
          Limit: limit,
          ExclusiveStartKey: decodeCursor(cursor, scope),
        }),
      );
      return {
        items: (page.Items ?? []).map((item) => recordSchema.parse(item.record)),
        nextCursor: encodeCursor(page.LastEvaluatedKey, scope),
      };
    },
  };
}

const nonceKey = (source: string, signature: string) => ({
  pk: `WEBHOOK#${source}#${sha256Hex(signature)}`,
  sk: 'NONCE',
});

/** Used webhook signatures, each a conditional put that ages out by TTL. */
export function makeDynamoWebhookNonces(client: DynamoDBDocumentClient, table: string): WebhookNonces {
  return {
    claim: (source, signature, expiresAtSeconds) =>
      conditionally(async () => {
        await client.send(
          new PutCommand({
            TableName: table,
            Item: { ...nonceKey(source, signature), expiresAt: expiresAtSeconds },
            // An expired item TTL has not removed yet does not count.
            ConditionExpression: 'attribute_not_exists(pk) OR expiresAt < :now',
            ExpressionAttributeValues: { ':now': Math.floor(Date.now() / 1000) },
          }),
        );
        return true;
      }, false),
    async release(source, signature) {
      await client.send(new DeleteCommand({ TableName: table, Key: nonceKey(source, signature) }));
    },
  };
}

import { DeleteCommand, type DynamoDBDocumentClient, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import type { AdmissionStore, Cell } from '../../app/ports/admission.js';
import { StaleWriteError } from '../../domain/errors.js';
import { admissionItemOf, admissionKey, BACKLOG_TENANTS } from './admission-items.js';
import { queryPages } from './paginate.js';
import { cancellationCodes } from './transaction.js';

const cellOf = (item: Record<string, unknown>): Cell => ({
  name: String(item.sk),
  value: (item.v ?? {}) as Record<string, unknown>,
  ...(typeof item.n === 'number' && { n: item.n }),
});

/** Admission cells in the state table, one partition per tenant (`ADMISSION#<tenant>`). */
export function makeDynamoAdmissionStore(client: DynamoDBDocumentClient, table: string): AdmissionStore {
  return {
    async cells(tenantId, prefix, limit = 1_000) {
      const { items } = await queryPages(
        client,
        {
          TableName: table,
          // An empty prefix (every cell) cannot be a key condition.
          KeyConditionExpression: prefix ? 'pk = :pk AND begins_with(sk, :prefix)' : 'pk = :pk',
          ExpressionAttributeValues: { ':pk': admissionKey(tenantId), ...(prefix && { ':prefix': prefix }) },
          ConsistentRead: true,
        },
        cellOf,
        { limit },
      );
      return items;
    },

    async commit(writes) {
      if (writes.length === 0) return;
      try {
        await client.send(
          new TransactWriteCommand({ TransactItems: writes.map((intent) => admissionItemOf(table, intent)) }),
        );
      } catch (error) {
        const codes = cancellationCodes(error);
        if (codes?.includes('ConditionalCheckFailed')) throw new StaleWriteError(codes);
        throw error;
      }
    },

    async markBacklog(tenantId, mark) {
      // A plain put, outside any transaction: many throttled runs note the same tenant at once.
      await client.send(new PutCommand({ TableName: table, Item: { pk: BACKLOG_TENANTS, sk: tenantId, at: mark } }));
    },

    async backlogTenants() {
      const { items } = await queryPages(
        client,
        {
          TableName: table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': BACKLOG_TENANTS },
          ConsistentRead: true,
        },
        (item) => ({ tenantId: String(item.sk), mark: String(item.at) }),
        { limit: 1_000 },
      );
      return items;
    },

    async clearBacklog(tenantId, mark) {
      try {
        await client.send(
          new DeleteCommand({
            TableName: table,
            Key: { pk: BACKLOG_TENANTS, sk: tenantId },
            ConditionExpression: '#at = :at',
            ExpressionAttributeNames: { '#at': 'at' },
            ExpressionAttributeValues: { ':at': mark },
          }),
        );
      } catch (error) {
        // Noted again meanwhile: the admitter visits it next time.
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
    },
  };
}

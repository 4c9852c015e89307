import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { ApprovalStore } from '../../app/ports/approvals.js';
import { approvalSchema } from '../../domain/entities.js';
import { approvalSk, indexes, prefixes, runKey } from './keys.js';
import { queryPages } from './paginate.js';

export type { ApprovalStore } from '../../app/ports/approvals.js';

/**
 * Approval gates, kept in their run's partition so a decision, its events and the run's new status
 * commit in one transaction (`putApproval` / `updateApproval` intents). Every update is guarded by
 * the status and the number of decisions it was decided on, so two approvers deciding at the same
 * moment never lose or double a decision.
 */
export function makeApprovalStore(client: DynamoDBDocumentClient, table: string): ApprovalStore {
  return {
    async list(runId) {
      const { items } = await queryPages(
        client,
        {
          TableName: table,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :a)',
          ExpressionAttributeValues: { ':pk': runKey(runId), ':a': prefixes.approval },
          ConsistentRead: true,
        },
        (item) => approvalSchema.parse(item.approval),
      );
      return items.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
    },

    async get(runId, approvalId) {
      const { Item } = await client.send(
        new GetCommand({
          TableName: table,
          Key: { pk: runKey(runId), sk: approvalSk(approvalId) },
          ConsistentRead: true,
        }),
      );
      return Item ? approvalSchema.parse(Item.approval) : undefined;
    },

    async due(now, limit = 100) {
      const { items } = await queryPages(
        client,
        {
          TableName: table,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk <= :now',
          ExpressionAttributeValues: { ':pk': indexes.approvalsDue, ':now': `${now.toISOString()}#~` },
        },
        (item) => {
          const approval = approvalSchema.parse(item.approval);
          return { runId: approval.runId, approvalId: approval.approvalId };
        },
        { limit },
      );
      return items;
    },
  };
}

import { type DynamoDBDocumentClient, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { type Approval, approvalSchema } from '../../domain/entities.js';
import { runKey, type TransactItem } from './run-store.js';

const approvalSk = (approvalId: string) => `APPROVAL#${approvalId}`;
/** Open gates by when time next acts on them (SLA, then hard limit), on gsi2, for the reconciler. */
const DUE_INDEX = 'APPROVALS_DUE';

/** When time next acts on an open gate; none once it is resolved. */
const dueAt = (approval: Approval) =>
  approval.status === 'requested'
    ? approval.slaDeadline
    : approval.status === 'escalated'
      ? approval.hardDeadline
      : undefined;

const dueKey = (approval: Approval) => {
  const at = dueAt(approval);
  return at === undefined ? undefined : { gsi2pk: DUE_INDEX, gsi2sk: `${at}#${approval.runId}#${approval.approvalId}` };
};

/**
 * Approval gates, kept in their run's partition so a decision, its events and the run's new status
 * commit in one transaction. Every update is guarded by the status and the number of decisions it
 * was decided on, so two approvers deciding at the same moment never lose or double a decision.
 */
export function makeApprovalStore(client: DynamoDBDocumentClient, table: string) {
  return {
    async list(runId: string): Promise<Approval[]> {
      const found: Approval[] = [];
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new QueryCommand({
            TableName: table,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :a)',
            ExpressionAttributeValues: { ':pk': runKey(runId), ':a': 'APPROVAL#' },
            ConsistentRead: true,
            ExclusiveStartKey: startKey,
          }),
        );
        for (const item of page.Items ?? []) found.push(approvalSchema.parse(item.approval));
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      return found.sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
    },

    async get(runId: string, approvalId: string): Promise<Approval | undefined> {
      const { Item } = await client.send(
        new GetCommand({
          TableName: table,
          Key: { pk: runKey(runId), sk: approvalSk(approvalId) },
          ConsistentRead: true,
        }),
      );
      return Item ? approvalSchema.parse(Item.approval) : undefined;
    },

    /** Open gates whose SLA or hard limit has passed, oldest first. */
    async due(now: Date, limit = 100): Promise<Array<{ runId: string; approvalId: string }>> {
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: table,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk <= :now',
          ExpressionAttributeValues: { ':pk': DUE_INDEX, ':now': `${now.toISOString()}#~` },
          Limit: limit,
        }),
      );
      return Items.map((item) => {
        const approval = approvalSchema.parse(item.approval);
        return { runId: approval.runId, approvalId: approval.approvalId };
      });
    },

    /** A new gate; fails the transaction if the gate exists already. */
    put(approval: Approval): TransactItem {
      return {
        Put: {
          TableName: table,
          Item: {
            pk: runKey(approval.runId),
            sk: approvalSk(approval.approvalId),
            approval,
            status: approval.status,
            decisionCount: approval.decisions.length,
            ...dueKey(approval),
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    },

    /** The gate's new state, if it still stands as `was` (same status, same number of decisions). */
    update(approval: Approval, was: Pick<Approval, 'status' | 'decisions'>): TransactItem {
      const due = dueKey(approval);
      return {
        Update: {
          TableName: table,
          Key: { pk: runKey(approval.runId), sk: approvalSk(approval.approvalId) },
          UpdateExpression:
            'SET approval = :a, #status = :s, decisionCount = :n' +
            (due ? ', gsi2pk = :dpk, gsi2sk = :dsk' : ' REMOVE gsi2pk, gsi2sk'),
          ConditionExpression: '#status = :was AND decisionCount = :wasCount',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':a': approval,
            ':s': approval.status,
            ':n': approval.decisions.length,
            ':was': was.status,
            ':wasCount': was.decisions.length,
            ...(due && { ':dpk': due.gsi2pk, ':dsk': due.gsi2sk }),
          },
        },
      };
    },
  };
}

export type ApprovalStore = ReturnType<typeof makeApprovalStore>;

import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { LeaseOutcome, StepExecutions } from '../../app/ports/runs.js';
import { type StepExecution, stepExecutionSchema } from '../../domain/entities.js';
import { leaseClaimOf } from '../../domain/recovery.js';
import { conditionally } from './conditional.js';
import { executionSk, indexes, leaseIndexSk, prefixes, runKey } from './keys.js';
import { queryPages } from './paginate.js';

/**
 * A stored step execution. The lease expiry lives in its own attribute (`leaseUntil`), renewed
 * without rewriting the execution, so a writer that replaces the execution never moves it back.
 */
function executionOf(item: Record<string, unknown>): StepExecution {
  const execution = stepExecutionSchema.parse(item.se);
  return typeof item.leaseUntil === 'string' ? { ...execution, leaseExpiresAt: item.leaseUntil } : execution;
}

/** Step executions in their run's partition, and their leases (indexed by expiry on gsi2). */
export function makeStepExecutions(client: DynamoDBDocumentClient, state: string): StepExecutions {
  async function execution(runId: string, executionId: string): Promise<StepExecution | undefined> {
    const { Item } = await client.send(
      new GetCommand({
        TableName: state,
        Key: { pk: runKey(runId), sk: executionSk(executionId) },
        ConsistentRead: true,
      }),
    );
    return Item ? executionOf(Item) : undefined;
  }

  return {
    execution,

    async executions(runId) {
      const { items } = await queryPages(
        client,
        {
          TableName: state,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :se)',
          ExpressionAttributeValues: { ':pk': runKey(runId), ':se': prefixes.execution },
          ConsistentRead: true,
        },
        executionOf,
      );
      return items;
    },

    async acquireLease(runId, executionId, owner, now, leaseMs) {
      const current = await execution(runId, executionId);
      if (!current) return { claim: 'ended' };
      const claim = leaseClaimOf(current, now);
      if (claim === 'lost') return { claim, execution: current };
      if (claim !== 'lease') return { claim };
      const leased: StepExecution = {
        ...current,
        status: 'leased',
        leaseOwner: owner,
        leaseExpiresAt: new Date(now.getTime() + leaseMs).toISOString(),
      };
      return conditionally<LeaseOutcome, LeaseOutcome>(
        async () => {
          await client.send(
            new UpdateCommand({
              TableName: state,
              Key: { pk: runKey(runId), sk: executionSk(executionId) },
              UpdateExpression: 'SET se = :e, #status = :s, leaseUntil = :until, gsi2pk = :ipk, gsi2sk = :isk',
              // Unchanged since it was read: same status and holder, and a lease still lapsed.
              ConditionExpression:
                '#status = :was AND (attribute_not_exists(se.leaseOwner) OR se.leaseOwner = :prev) AND ' +
                '(attribute_not_exists(leaseUntil) OR leaseUntil < :now)',
              ExpressionAttributeNames: { '#status': 'status' },
              ExpressionAttributeValues: {
                ':e': leased,
                ':s': 'leased',
                ':until': leased.leaseExpiresAt,
                ':ipk': indexes.leases,
                ':isk': leaseIndexSk(leased.leaseExpiresAt ?? '', runId, executionId),
                ':was': current.status,
                ':prev': current.leaseOwner ?? '',
                ':now': now.toISOString(),
              },
            }),
          );
          return { claim: 'lease', execution: leased };
        },
        { claim: 'held' },
      );
    },

    async renewLease(runId, executionId, owner, until) {
      return conditionally(async () => {
        await client.send(
          new UpdateCommand({
            TableName: state,
            Key: { pk: runKey(runId), sk: executionSk(executionId) },
            UpdateExpression: 'SET leaseUntil = :until, gsi2sk = :isk',
            ConditionExpression: 'se.leaseOwner = :owner AND #status IN (:leased, :running)',
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: {
              ':until': until.toISOString(),
              ':isk': leaseIndexSk(until.toISOString(), runId, executionId),
              ':owner': owner,
              ':leased': 'leased',
              ':running': 'running',
            },
          }),
        );
        return true;
      }, false);
    },

    async expiredLeases(now, limit = 100) {
      const { items } = await queryPages(
        client,
        {
          TableName: state,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk < :now',
          ExpressionAttributeValues: { ':pk': indexes.leases, ':now': now.toISOString() },
        },
        (item) => {
          const se = stepExecutionSchema.parse(item.se);
          return { runId: se.runId, executionId: se.executionId };
        },
        { limit },
      );
      return items;
    },
  };
}

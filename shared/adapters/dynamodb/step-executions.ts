import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { StepExecutions } from '../../app/ports/runs.js';
import { type StepExecution, stepExecutionSchema } from '../../domain/entities.js';
import { leaseClaimOf } from '../../domain/recovery.js';
import { conditionally } from './conditional.js';
import { executionSk, indexes, leaseIndexSk, prefixes, runKey } from './keys.js';
import { queryPages } from './paginate.js';

/**
 * A stored step execution. The lease expiry lives in its own attribute (`leaseUntil`), renewed
 * without rewriting the execution, so a writer that replaces the execution never moves it back.
 */
export function executionOf(item: Record<string, unknown>): StepExecution {
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
      const until = new Date(now.getTime() + leaseMs).toISOString();
      // One conditional write that returns the leased item: the condition is `leaseClaimOf(...)
      // === 'lease'` (pending, or leased with a lapsed lease), so nothing is read unless refused.
      const leased = await conditionally(async () => {
        const { Attributes } = await client.send(
          new UpdateCommand({
            TableName: state,
            Key: { pk: runKey(runId), sk: executionSk(executionId) },
            UpdateExpression:
              'SET se.#status = :leased, se.leaseOwner = :owner, se.leaseExpiresAt = :until, ' +
              '#status = :leased, leaseUntil = :until, gsi2pk = :ipk, gsi2sk = :isk',
            ConditionExpression:
              '#status = :pending OR (#status = :leased AND (leaseUntil < :now OR ' +
              '(attribute_not_exists(leaseUntil) AND se.leaseExpiresAt < :now)))',
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: {
              ':leased': 'leased',
              ':pending': 'pending',
              ':owner': owner,
              ':until': until,
              ':ipk': indexes.leases,
              ':isk': leaseIndexSk(until, runId, executionId),
              ':now': now.toISOString(),
            },
            ReturnValues: 'ALL_NEW',
          }),
        );
        return Attributes ? executionOf(Attributes) : undefined;
      }, undefined);
      if (leased) return { claim: 'lease', execution: leased };
      // Refused: read why (ended, held by a live worker, or lost mid-action).
      const current = await execution(runId, executionId);
      if (!current) return { claim: 'ended' };
      const claim = leaseClaimOf(current, now);
      if (claim === 'lost') return { claim, execution: current };
      // A lease that lapsed between the write and the read went to nobody: it is someone else's race.
      if (claim === 'lease') return { claim: 'held' };
      return { claim };
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

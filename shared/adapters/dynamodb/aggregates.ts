import { type DynamoDBDocumentClient, GetCommand, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import type { Aggregates } from '../../app/ports/runs.js';
import { aggregateSchema } from '../../domain/step-records.js';
import { conditionally } from './conditional.js';
import { aggregateSk, prefixes, runKey } from './keys.js';
import { queryPages } from './paginate.js';

/** Step aggregates in their run's partition; counts into them are write intents of a run change. */
export function makeAggregates(client: DynamoDBDocumentClient, state: string): Aggregates {
  /** One conditional update of an aggregate: the aggregate as it left it, or undefined when refused. */
  const update = (
    runId: string,
    kind: string,
    stepId: string,
    attempt: number,
    expression: Pick<
      UpdateCommandInput,
      'UpdateExpression' | 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'
    >,
  ) =>
    conditionally(async () => {
      const { Attributes } = await client.send(
        new UpdateCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
          ...expression,
          ReturnValues: 'ALL_NEW',
        }),
      );
      return aggregateSchema.parse(Attributes);
    }, undefined);

  return {
    async aggregates(runId) {
      const { items } = await queryPages(
        client,
        {
          TableName: state,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :agg)',
          ExpressionAttributeValues: { ':pk': runKey(runId), ':agg': prefixes.aggregate },
          ConsistentRead: true,
        },
        (item) => aggregateSchema.parse(item),
      );
      return items;
    },

    async aggregate(runId, kind, stepId, attempt) {
      const { Item } = await client.send(
        new GetCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
          ConsistentRead: true,
        }),
      );
      return Item ? aggregateSchema.parse(Item) : undefined;
    },

    setAggregateToken: (runId, kind, stepId, attempt, taskToken) =>
      update(runId, kind, stepId, attempt, {
        UpdateExpression: 'SET taskToken = :t',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeValues: { ':t': taskToken },
      }),

    claimCompletion: (runId, kind, stepId, attempt) =>
      update(runId, kind, stepId, attempt, {
        UpdateExpression: 'SET #completed = :true',
        ConditionExpression: '#completed = :false AND #done = #total',
        ExpressionAttributeNames: { '#completed': 'completed', '#done': 'done', '#total': 'total' },
        ExpressionAttributeValues: { ':true': true, ':false': false },
      }),
  };
}

import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RunSnapshots } from '../../app/ports/runs.js';
import { META, prefixes, runKey } from './keys.js';
import { queryPages } from './paginate.js';
import { recordOf } from './run-log.js';
import { executionOf } from './step-executions.js';

/**
 * A run's head and its step executions in one Query of its partition: the sort keys from `META`
 * to the last `SE#` hold nothing else (`AGG#`, `APPROVAL#` and `INBOX#` sort before `META`, `WAIT#`
 * after the executions), and items of any other kind in that range are skipped.
 */
export function makeRunSnapshots(client: DynamoDBDocumentClient, state: string): RunSnapshots {
  return {
    async snapshot(runId) {
      const { items } = await queryPages(
        client,
        {
          TableName: state,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :head AND :last',
          ExpressionAttributeValues: {
            ':pk': runKey(runId),
            ':head': META,
            ':last': `${prefixes.execution}\uffff`,
          },
          ConsistentRead: true,
        },
        (item) => item,
      );
      const head = items.find((item) => item.sk === META);
      if (!head) return undefined;
      // In sort-key order, as `executions` lists them.
      const executions = items.filter((item) => String(item.sk).startsWith(prefixes.execution)).map(executionOf);
      return { record: recordOf(head), executions };
    },
  };
}

import { DeleteCommand, type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Receipts, WaitTokens } from '../../app/ports/runs.js';
import { receiptSchema } from '../../domain/step-records.js';
import { META, receiptKey, runKey, waitSk } from './keys.js';

/** Receipts of succeeded steps, by idempotency key (written by a result's transaction). */
export function makeReceipts(client: DynamoDBDocumentClient, state: string): Receipts {
  return {
    async receipt(key) {
      const { Item } = await client.send(
        new GetCommand({ TableName: state, Key: { pk: receiptKey(key), sk: META }, ConsistentRead: true }),
      );
      return Item ? receiptSchema.parse(Item.receipt) : undefined;
    },
  };
}

/** Task tokens of waiting interpreter tasks, in their run's partition. */
export function makeWaitTokens(client: DynamoDBDocumentClient, state: string): WaitTokens {
  return {
    async putWaitToken(runId, waitingFor, taskToken, at) {
      await client.send(
        new PutCommand({ TableName: state, Item: { pk: runKey(runId), sk: waitSk(waitingFor), taskToken, at } }),
      );
    },

    // Delete-and-return, so exactly one caller resumes the task: the request that ended the wait,
    // or the task itself when the wait ended before its token was stored.
    async claimWaitToken(runId, waitingFor) {
      const { Attributes } = await client.send(
        new DeleteCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: waitSk(waitingFor) },
          ReturnValues: 'ALL_OLD',
        }),
      );
      return typeof Attributes?.taskToken === 'string' ? Attributes.taskToken : undefined;
    },
  };
}

import { type DynamoDBDocumentClient, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { WorkerStore } from '../../app/ports.js';
import { type Worker, workerSchema } from '../../domain/entities.js';
import { conditionally } from './conditional.js';

const workerKey = (workerId: string) => `WORKER#${workerId}`;
const WORKERS_INDEX = 'WORKERS';

const workerItemSchema = z.object({ worker: workerSchema, drainRequested: z.boolean().default(false) });

/**
 * Registered workers in the state table, listed through gsi1. A heartbeat is one conditional
 * update that also tells the worker whether an operator asked it to drain.
 */
export function makeWorkerStore(client: DynamoDBDocumentClient, tableName: string): WorkerStore {
  const key = (workerId: string) => ({ pk: workerKey(workerId), sk: 'META' });
  return {
    async register(worker) {
      await client.send(
        new PutCommand({
          TableName: tableName,
          Item: {
            ...key(worker.workerId),
            gsi1pk: WORKERS_INDEX,
            gsi1sk: worker.workerId,
            worker,
            drainRequested: false,
            // Deregistered and dead workers age out of the listing after a week.
            expiresAt: Math.floor(Date.parse(worker.registeredAt) / 1000) + 7 * 86_400,
          },
        }),
      );
    },

    async heartbeat(workerId, beat) {
      return conditionally(
        async () => {
          const { Attributes } = await client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: key(workerId),
              UpdateExpression:
                'SET #w.#status = :status, #w.lastHeartbeatAt = :at, #w.stats = :stats, expiresAt = :exp' +
                (beat.currentExecutionId ? ', #w.currentExecutionId = :current' : ' REMOVE #w.currentExecutionId'),
              ConditionExpression: 'attribute_exists(pk) AND NOT #w.#status IN (:dead, :gone)',
              ExpressionAttributeNames: { '#w': 'worker', '#status': 'status' },
              ExpressionAttributeValues: {
                ':status': beat.status,
                ':at': beat.at,
                ':stats': beat.stats,
                ':exp': Math.floor(Date.parse(beat.at) / 1000) + 7 * 86_400,
                ':dead': 'dead',
                ':gone': 'deregistered',
                ...(beat.currentExecutionId ? { ':current': beat.currentExecutionId } : {}),
              },
              ReturnValues: 'ALL_NEW',
            }),
          );
          return { accepted: true as const, drainRequested: workerItemSchema.parse(Attributes).drainRequested };
        },
        { accepted: false as const, drainRequested: false },
      );
    },

    async setStatus(workerId, status, expected) {
      return conditionally(async () => {
        await client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: key(workerId),
            UpdateExpression: 'SET #w.#status = :status REMOVE #w.currentExecutionId',
            ConditionExpression:
              'attribute_exists(pk) AND NOT #w.#status IN (:dead, :gone)' +
              (expected ? ' AND #w.lastHeartbeatAt = :seen' : ''),
            ExpressionAttributeNames: { '#w': 'worker', '#status': 'status' },
            ExpressionAttributeValues: {
              ':status': status,
              ':dead': 'dead',
              ':gone': 'deregistered',
              ...(expected ? { ':seen': expected.lastHeartbeatAt } : {}),
            },
          }),
        );
        return true;
      }, false);
    },

    async clearCurrent(workerId, executionId) {
      return conditionally(async () => {
        await client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: key(workerId),
            UpdateExpression: 'SET #w.#status = :idle REMOVE #w.currentExecutionId',
            ConditionExpression: '#w.#status = :busy AND #w.currentExecutionId = :current',
            ExpressionAttributeNames: { '#w': 'worker', '#status': 'status' },
            ExpressionAttributeValues: { ':idle': 'idle', ':busy': 'busy', ':current': executionId },
          }),
        );
        return true;
      }, false);
    },

    async requestDrain(workerId) {
      return conditionally(async () => {
        await client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: key(workerId),
            UpdateExpression: 'SET drainRequested = :yes',
            ConditionExpression: 'attribute_exists(pk) AND NOT #w.#status IN (:dead, :gone)',
            ExpressionAttributeNames: { '#w': 'worker', '#status': 'status' },
            ExpressionAttributeValues: { ':yes': true, ':dead': 'dead', ':gone': 'deregistered' },
          }),
        );
        return true;
      }, false);
    },

    async list() {
      const workers: Array<Worker & { drainRequested: boolean }> = [];
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new QueryCommand({
            TableName: tableName,
            IndexName: 'gsi1',
            KeyConditionExpression: 'gsi1pk = :pk',
            ExpressionAttributeValues: { ':pk': WORKERS_INDEX },
            ExclusiveStartKey: startKey,
          }),
        );
        for (const item of page.Items ?? []) {
          const parsed = workerItemSchema.parse(item);
          workers.push({ ...parsed.worker, drainRequested: parsed.drainRequested });
        }
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      return workers;
    },
  };
}

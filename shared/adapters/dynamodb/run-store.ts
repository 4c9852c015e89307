import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RunStore } from '../../app/ports/runs.js';
import { makeAggregates } from './aggregates.js';
import { makeReceipts, makeWaitTokens } from './receipts-and-waits.js';
import { makeRunLog, type RunLogTables } from './run-log.js';
import { makeRunSnapshots } from './run-snapshots.js';
import { makeStepExecutions } from './step-executions.js';

export type { RunStore } from '../../app/ports/runs.js';

/** The DynamoDB implementation of every run port, over the state and events tables. */
export function makeRunStore(client: DynamoDBDocumentClient, tables: RunLogTables): RunStore {
  return {
    ...makeRunLog(client, tables),
    ...makeStepExecutions(client, tables.state),
    ...makeRunSnapshots(client, tables.state),
    ...makeAggregates(client, tables.state),
    ...makeReceipts(client, tables.state),
    ...makeWaitTokens(client, tables.state),
  };
}

import {
  BatchGetCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  QueryCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { Page } from '../../app/ports.js';
import { type Run, runSchema } from '../../domain/entities.js';
import { decodeCursor, encodeCursor } from './cursor.js';

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/**
 * A ticket's items in the state table, one partition per tenant and ticket: `ACTIVE` names the
 * ticket's one active run (taken in the run's creating transaction, released in the transaction
 * that ends it), and `RUN#<createdAt>#<runId>` lists every run of the ticket, newest last.
 */
const ticketKey = (tenantId: string, ticketId: string) => `TENANT#${tenantId}#TICKET#${ticketId}`;
const ACTIVE = 'ACTIVE';

/** The write that makes a run its ticket's active run, refused while another holds it. */
export function ticketActiveItem(
  table: string,
  claim: { tenantId: string; ticketId: string; runId: string; since: string },
): TransactItem {
  return {
    Put: {
      TableName: table,
      Item: { pk: ticketKey(claim.tenantId, claim.ticketId), sk: ACTIVE, runId: claim.runId, since: claim.since },
      ConditionExpression: 'attribute_not_exists(pk)',
    },
  };
}

/**
 * The writes that list a new run under its ticket and make it the ticket's active run; a run
 * queued behind the active one takes the slot later, when it is admitted.
 */
export function ticketClaimItems(table: string, run: Run): TransactItem[] {
  if (!run.ticket) return [];
  const pk = ticketKey(run.tenantId, run.ticket.id);
  const claim = { tenantId: run.tenantId, ticketId: run.ticket.id, runId: run.runId, since: run.createdAt };
  return [
    ...(run.queuedBehind === undefined ? [ticketActiveItem(table, claim)] : []),
    { Put: { TableName: table, Item: { pk, sk: `RUN#${run.createdAt}#${run.runId}`, runId: run.runId } } },
  ];
}

/** The write that frees a ticket when its active run ends (a run that never held it frees nothing). */
export function ticketReleaseItem(table: string, run: Run): TransactItem | undefined {
  // A run still queued behind another never took the slot.
  if (!run.ticket || run.queuedBehind !== undefined) return undefined;
  return {
    Delete: {
      TableName: table,
      Key: { pk: ticketKey(run.tenantId, run.ticket.id), sk: ACTIVE },
      ConditionExpression: 'attribute_not_exists(pk) OR runId = :runId',
      ExpressionAttributeValues: { ':runId': run.runId },
    },
  };
}

/** The run that holds a ticket now, if one does. */
export async function activeTicketRun(
  client: DynamoDBDocumentClient,
  table: string,
  tenantId: string,
  ticketId: string,
): Promise<string | undefined> {
  const { Item } = await client.send(
    new GetCommand({ TableName: table, Key: { pk: ticketKey(tenantId, ticketId), sk: ACTIVE }, ConsistentRead: true }),
  );
  return typeof Item?.runId === 'string' ? Item.runId : undefined;
}

/** A ticket's runs, newest first, within one tenant: another tenant's runs are in another partition. */
export async function listTicketRuns(
  client: DynamoDBDocumentClient,
  table: string,
  tenantId: string,
  ticketId: string,
  options: { limit: number; cursor?: string },
): Promise<Page<Run>> {
  const pk = ticketKey(tenantId, ticketId);
  const scope = { keys: ['sk'], bound: { pk } };
  const page = await client.send(
    new QueryCommand({
      TableName: table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :run)',
      ExpressionAttributeValues: { ':pk': pk, ':run': 'RUN#' },
      ScanIndexForward: false,
      Limit: options.limit,
      ExclusiveStartKey: decodeCursor(options.cursor, scope),
    }),
  );
  const runIds = (page.Items ?? []).map((item) => z.object({ runId: z.string() }).parse(item).runId);
  const found = new Map<string, Run>();
  if (runIds.length > 0) {
    const { Responses } = await client.send(
      new BatchGetCommand({
        RequestItems: { [table]: { Keys: runIds.map((runId) => ({ pk: `RUN#${runId}`, sk: 'META' })) } },
      }),
    );
    for (const item of Responses?.[table] ?? []) {
      const run = runSchema.parse(item.run);
      found.set(run.runId, run);
    }
  }
  return {
    items: runIds.flatMap((id) => found.get(id) ?? []),
    nextCursor: encodeCursor(page.LastEvaluatedKey, scope),
  };
}

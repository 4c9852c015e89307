import { type DynamoDBDocumentClient, GetCommand, QueryCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { WriteIntent } from '../../app/ports/writes.js';
import { runSchema } from '../../domain/entities.js';
import { ConflictError, StaleWriteError } from '../../domain/errors.js';
import { chainEvents, runEventSchema } from '../../domain/events.js';
import { chainOrder, inboxOrderKey, SEQUENCE_BATCH, type StagedEvent } from '../../domain/inbox.js';
import { queryPages } from './paginate.js';
import { indexes, META, prefixes, runKey } from './keys.js';
import { cancellationCodes, type TransactItem, transactItemOf } from './transaction.js';

const draftSchema = runEventSchema.omit({ seq: true, prevHash: true, hash: true, runId: true, tenantId: true });
const stagedSchema = z.object({
  sk: z.string(),
  lane: z.string(),
  laneSeq: z.number().int().min(1),
  at: z.string(),
  event: draftSchema,
});
const headSchema = z.object({
  run: runSchema.pick({ runId: true, tenantId: true }).loose(),
  chainSeq: z.number().int().min(0),
  chainHash: z.string(),
  rev: z.number().int().optional(),
});

/** Event text per sequencing transaction, well under DynamoDB's 4 MB with the deletes beside it. */
const SEQUENCE_BYTES = 1024 * 1024;

const pause = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * 10 * Math.min(attempt + 1, 10)));

/**
 * A run's inbox in the state table (`INBOX#<at>#<lane>#<laneSeq>` in the run's partition), and its
 * sequencer: staged events move into the events table in batches, one transaction per batch on
 * the run's head, so a thousand targets cost the head a few dozen writes instead of thousands.
 */
export function makeInbox(client: DynamoDBDocumentClient, tables: { readonly state: string; readonly events: string }) {
  const { state, events: eventsTable } = tables;

  async function stage(runId: string, staged: readonly StagedEvent[], writes: readonly WriteIntent[]): Promise<void> {
    const items: TransactItem[] = [
      ...staged.map((s): TransactItem => ({
        Put: {
          TableName: state,
          Item: {
            pk: runKey(runId),
            sk: `${prefixes.inbox}${inboxOrderKey(s)}`,
            lane: s.lane,
            laneSeq: s.laneSeq,
            at: s.at,
            event: s.event,
            gsi2pk: indexes.inboxes,
            gsi2sk: `${s.at}#${runId}`,
          },
          ConditionExpression: 'attribute_not_exists(sk)',
        },
      })),
      ...writes.map((intent) => transactItemOf(state, intent)),
    ];
    if (items.length === 0) return;
    for (let attempt = 0; ; attempt++) {
      try {
        await client.send(new TransactWriteCommand({ TransactItems: items }));
        return;
      } catch (error) {
        const codes = cancellationCodes(error);
        if (!codes) throw error;
        if (codes.includes('ConditionalCheckFailed')) throw new StaleWriteError(codes);
        // Another transaction held one of the same items (an aggregate both targets count into): the
        // change was not applied, so applying it again is safe.
        if (!codes.includes('TransactionConflict') || attempt >= 20) throw error;
        await pause(attempt);
      }
    }
  }

  async function sequence(runId: string, options: { readonly eager?: boolean } = {}): Promise<void> {
    const patience = options.eager === false ? 1 : 50;
    for (let races = 0; races < patience;) {
      // The inbox sorts just before the run's head (`INBOX#` < `META`, nothing between): one Query
      // reads both, unless the inbox is longer than a batch.
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: state,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :inbox AND :meta',
          ExpressionAttributeValues: { ':pk': runKey(runId), ':inbox': prefixes.inbox, ':meta': META },
          ConsistentRead: true,
          Limit: SEQUENCE_BATCH + 1,
        }),
      );
      const staged = Items.filter((i) => i.sk !== META);
      if (staged.length === 0) return;
      const Item =
        Items.find((i) => i.sk === META) ??
        (
          await client.send(
            new GetCommand({ TableName: state, Key: { pk: runKey(runId), sk: META }, ConsistentRead: true }),
          )
        ).Item;
      if (!Item) return;
      const head = headSchema.parse(Item);
      const batch = withinBytes(
        chainOrder(staged.slice(0, SEQUENCE_BATCH).map((i) => stagedOf(stagedSchema.parse(i)))),
      );
      const { events, head: next } = chainEvents(
        { seq: head.chainSeq, hash: head.chainHash },
        head.run,
        batch.map((s) => s.event),
      );
      const items: TransactItem[] = [
        {
          Update: {
            TableName: state,
            Key: { pk: runKey(runId), sk: META },
            UpdateExpression: 'SET chainSeq = :seq, chainHash = :hash, rev = :rev',
            ConditionExpression:
              'chainSeq = :expected AND ' + (head.rev === undefined ? 'attribute_not_exists(rev)' : 'rev = :was'),
            ExpressionAttributeValues: {
              ':seq': next.seq,
              ':hash': next.hash,
              ':rev': (head.rev ?? 0) + 1,
              ':expected': head.chainSeq,
              ...(head.rev !== undefined && { ':was': head.rev }),
            },
          },
        },
        ...events.map((event): TransactItem => ({
          Put: { TableName: eventsTable, Item: event, ConditionExpression: 'attribute_not_exists(seq)' },
        })),
        // An event leaves the inbox in the transaction that chains it, so no two sequencers chain it twice.
        ...batch.map((s): TransactItem => ({
          Delete: {
            TableName: state,
            Key: { pk: runKey(runId), sk: s.sk },
            ConditionExpression: 'attribute_exists(sk)',
          },
        })),
      ];
      try {
        await client.send(new TransactWriteCommand({ TransactItems: items }));
      } catch (error) {
        if (!cancellationCodes(error)) throw error;
        // Another sequencer or writer moved the head first: look again.
        races++;
        await pause(races);
      }
    }
    if (options.eager === false) return;
    throw new ConflictError(`the run ${runId}'s inbox is contended; it is sequenced again on the next sweep`);
  }

  async function stalledInboxes(before: Date, limit = 100): Promise<string[]> {
    const { items } = await queryPages(
      client,
      {
        TableName: state,
        IndexName: 'gsi2',
        KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk < :before',
        ExpressionAttributeValues: { ':pk': indexes.inboxes, ':before': before.toISOString() },
      },
      (item) => z.object({ pk: z.string() }).parse(item).pk.slice(runKey('').length),
      { limit },
    );
    return [...new Set(items)];
  }

  return { stage, sequence, stalledInboxes };
}

type Held = StagedEvent & { readonly sk: string };

const stagedOf = (item: z.infer<typeof stagedSchema>): Held => ({
  sk: item.sk,
  lane: item.lane,
  laneSeq: item.laneSeq,
  at: item.at,
  event: item.event,
});

/** The longest prefix of `batch` under the transaction's byte budget (at least one event). */
function withinBytes(batch: readonly Held[]): Held[] {
  let bytes = 0;
  const taken: Held[] = [];
  for (const staged of batch) {
    bytes += Buffer.byteLength(JSON.stringify(staged.event));
    if (taken.length > 0 && bytes > SEQUENCE_BYTES) break;
    taken.push(staged);
  }
  return taken;
}

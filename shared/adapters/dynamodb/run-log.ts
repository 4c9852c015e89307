import { type DynamoDBDocumentClient, GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { releasesOnEnd } from '../../app/ports/admission.js';
import type { CarriedRun, RunLog, RunRecord } from '../../app/ports/runs.js';
import { runSchema } from '../../domain/entities.js';
import { ConflictError } from '../../domain/errors.js';
import { type ChainHead, chainEvents, EMPTY_CHAIN, type RunEvent, runEventSchema } from '../../domain/events.js';
import { TicketBusyError } from '../../domain/intake/ticket.js';
import { runStateMachine } from '../../domain/statuses.js';
import { recordRunCommit } from '../../observability/run-metrics.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { makeInbox } from './inbox.js';
import { idempotencyKey, indexes, META, runKey, runsListKey } from './keys.js';
import { queryPages } from './paginate.js';
import { activeTicketRun, listTicketRuns, ticketClaimItems, ticketReleaseItem } from './ticket-items.js';
import { cancellationCodes, headMovedOrThrow, type TransactItem, transactItemOf } from './transaction.js';

const runItemSchema = z.object({
  run: runSchema,
  chainSeq: z.number().int().min(0),
  chainHash: z.string(),
  rollbackRequested: z.boolean().default(false),
  executionArn: z.string().optional(),
  /** Bumped by every change, with or without events, so a writer deciding on a held record never overwrites a newer one. */
  rev: z.number().int().optional(),
});

/** The chain head and the run's tenant, as `append` reads them. */
const headItemSchema = z.object({
  chainSeq: z.number().int().min(0),
  chainHash: z.string(),
  run: z.object({ tenantId: z.string() }),
});

/** Revisions of the records this store read or wrote, so a held record is checked against the one it came from. */
const revisions = new WeakMap<RunRecord, number | undefined>();

/** The run an item of the run's head (`META`) holds, with its revision for `carry` and `mutate`. */
export function recordOf(item: Record<string, unknown>): RunRecord {
  const parsed = runItemSchema.parse(item);
  const record: RunRecord = {
    run: parsed.run,
    head: { seq: parsed.chainSeq, hash: parsed.chainHash },
    rollbackRequested: parsed.rollbackRequested,
    executionArn: parsed.executionArn,
  };
  revisions.set(record, parsed.rev);
  return record;
}

/** The run log's tables, and the deployment environment its metrics are published under. */
export interface RunLogTables {
  readonly state: string;
  readonly events: string;
  /** @default 'none' */
  readonly environment?: string;
}

/**
 * Runs and their event log. Every change to a run appends its events in the same transaction,
 * guarded by the run's revision, so the log has no gap, no duplicate seq and no event without its
 * state (or state without its event).
 */
export function makeRunLog(client: DynamoDBDocumentClient, tables: RunLogTables): RunLog {
  const { state, events: eventsTable } = tables;
  const environment = tables.environment ?? 'none';

  async function load(runId: string): Promise<RunRecord | undefined> {
    const { Item } = await client.send(
      new GetCommand({ TableName: state, Key: { pk: runKey(runId), sk: META }, ConsistentRead: true }),
    );
    return Item ? recordOf(Item) : undefined;
  }

  /** Where the run's event chain stands (the rest of the run left out); only in the run's own tenant. */
  async function chainHead(run: { readonly runId: string; readonly tenantId: string }): Promise<ChainHead> {
    const { Item } = await client.send(
      new GetCommand({
        TableName: state,
        Key: { pk: runKey(run.runId), sk: META },
        ProjectionExpression: 'chainSeq, chainHash, #run.tenantId',
        ExpressionAttributeNames: { '#run': 'run' },
        ConsistentRead: true,
      }),
    );
    const parsed = headItemSchema.safeParse(Item);
    if (!parsed.success || parsed.data.run.tenantId !== run.tenantId)
      throw new Error(`run ${run.runId} does not exist in tenant ${run.tenantId}`);
    return { seq: parsed.data.chainSeq, hash: parsed.data.chainHash };
  }

  const eventPuts = (list: readonly RunEvent[]): TransactItem[] =>
    list.map((event) => ({
      Put: { TableName: eventsTable, Item: event, ConditionExpression: 'attribute_not_exists(seq)' },
    }));

  return {
    load,

    carry(record): CarriedRun | undefined {
      return revisions.has(record) ? { record, revision: revisions.get(record) ?? null } : undefined;
    },

    hold(carried) {
      const record: RunRecord = { ...carried.record };
      revisions.set(record, carried.revision ?? undefined);
      return record;
    },
    ...makeInbox(client, { state, events: eventsTable }),

    async mutate(runId, decide, known) {
      // A record the caller holds saves the first read; a stale one only costs a retry, since the
      // revision condition refuses it.
      let held = known && revisions.has(known) ? known : undefined;
      for (let attempt = 0; attempt < 20; attempt++) {
        const record = held ?? (await load(runId));
        held = undefined;
        if (!record) return undefined;
        const change = decide(record);
        if (!change) return undefined;
        const { events: chained, head } = chainEvents(record.head, record.run, change.events);
        const run = runSchema.parse({ ...record.run, ...change.run });
        const rev = revisions.get(record);
        const next = (rev ?? 0) + 1;
        const rollbackRequested = change.rollbackRequested ?? record.rollbackRequested;
        const executionArn = change.executionArn ?? record.executionArn;
        const items: TransactItem[] = [
          {
            Update: {
              TableName: state,
              Key: { pk: runKey(runId), sk: META },
              UpdateExpression:
                'SET #run = :run, chainSeq = :seq, chainHash = :hash, rollbackRequested = :rb, rev = :rev' +
                (change.executionArn ? ', executionArn = :arn' : '') +
                (runStateMachine.isTerminal(run.status) ? ' REMOVE gsi2pk, gsi2sk' : ''),
              // The head's hash and the tenant too: a record held from elsewhere (carried in the
              // interpreter's state) is the stored run only if all of it matches.
              ConditionExpression:
                'chainSeq = :expected AND chainHash = :prev AND #run.tenantId = :tenant AND ' +
                (rev === undefined ? 'attribute_not_exists(rev)' : 'rev = :was'),
              ExpressionAttributeNames: { '#run': 'run' },
              ExpressionAttributeValues: {
                ':run': run,
                ':seq': head.seq,
                ':hash': head.hash,
                ':rb': rollbackRequested,
                ':rev': next,
                ':expected': record.head.seq,
                ':prev': record.head.hash,
                ':tenant': record.run.tenantId,
                ...(rev !== undefined && { ':was': rev }),
                ...(change.executionArn ? { ':arn': change.executionArn } : {}),
              },
            },
          },
          ...eventPuts(chained),
          ...(change.writes ?? []).map((intent) => transactItemOf(state, intent)),
        ];
        // The run that ends frees its ticket for the next one, in the same transaction.
        const release = !runStateMachine.isTerminal(record.run.status) && runStateMachine.isTerminal(run.status);
        const freed = release ? ticketReleaseItem(state, run) : undefined;
        if (freed) items.push(freed);
        // So do its admission slots and backlog place.
        if (release) items.push(...releasesOnEnd(record.run, run).map((intent) => transactItemOf(state, intent)));
        try {
          await client.send(new TransactWriteCommand({ TransactItems: items }));
          const committed: RunRecord = { run, head, rollbackRequested, executionArn };
          revisions.set(committed, next);
          recordRunCommit(record.run, run, change.writes ?? [], environment);
          return { record: committed, events: chained };
        } catch (error) {
          // The run moved (another writer changed it first): decide again on fresh state.
          headMovedOrThrow(error);
          // A held record that was stale is not contention: read again at once.
          if (attempt > 0 || !known) await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
        }
      }
      throw new ConflictError(`the run ${runId} is changing too fast; try again`);
    },

    async append(run, change, known) {
      let head = known;
      for (let attempt = 0; attempt < 20; attempt++) {
        head ??= await chainHead(run);
        const { events: chained, head: next } = chainEvents(head, run, change.events);
        const items: TransactItem[] = [
          {
            Update: {
              TableName: state,
              Key: { pk: runKey(run.runId), sk: META },
              // The run entity is left as it is; `rev` moves so a writer holding the run decides again.
              UpdateExpression: 'SET chainSeq = :seq, chainHash = :hash ADD rev :one',
              ConditionExpression: 'chainSeq = :expected AND chainHash = :prev AND #run.tenantId = :tenant',
              ExpressionAttributeNames: { '#run': 'run' },
              ExpressionAttributeValues: {
                ':seq': next.seq,
                ':hash': next.hash,
                ':one': 1,
                ':expected': head.seq,
                ':prev': head.hash,
                ':tenant': run.tenantId,
              },
            },
          },
          ...eventPuts(chained),
          ...(change.writes ?? []).map((intent) => transactItemOf(state, intent)),
        ];
        try {
          await client.send(new TransactWriteCommand({ TransactItems: items }));
          return { head: next, events: chained };
        } catch (error) {
          headMovedOrThrow(error);
          // Chain again on the head as it now stands; backing off only when it keeps moving.
          if (attempt > 0) await new Promise((r) => setTimeout(r, Math.random() * 20 * attempt));
          head = undefined;
        }
      }
      throw new ConflictError(`the run ${run.runId} is changing too fast; try again`);
    },

    async create(run, firstEvents, idempotency) {
      const { events: chained, head } = chainEvents(EMPTY_CHAIN, run, firstEvents);
      const items: TransactItem[] = [
        {
          Put: {
            TableName: state,
            Item: {
              pk: runKey(run.runId),
              sk: META,
              gsi1pk: runsListKey(run.tenantId),
              gsi1sk: `${run.createdAt}#${run.runId}`,
              gsi2pk: indexes.activeRuns,
              gsi2sk: `${run.createdAt}#${run.runId}`,
              run,
              chainSeq: head.seq,
              chainHash: head.hash,
              rollbackRequested: false,
              rev: 0,
            },
            ConditionExpression: 'attribute_not_exists(pk)',
          },
        },
        ...eventPuts(chained),
      ];
      if (idempotency)
        items.push({
          Put: {
            TableName: state,
            Item: {
              pk: idempotencyKey(run.tenantId, idempotency.key),
              sk: META,
              runId: run.runId,
              requestHash: idempotency.requestHash,
              // Keys are remembered for a day, like most idempotency windows.
              expiresAt: Math.floor(Date.parse(run.createdAt) / 1000) + 86_400,
            },
            ConditionExpression: 'attribute_not_exists(pk)',
          },
        });
      // A ticket has one active run: its claim commits with the run or not at all.
      items.push(...ticketClaimItems(state, run));
      for (let attempt = 0; ; attempt++) {
        try {
          await client.send(new TransactWriteCommand({ TransactItems: items }));
          recordRunCommit(undefined, run, [], environment);
          const record: RunRecord = { run, head, rollbackRequested: false };
          revisions.set(record, 0);
          return { created: true, record };
        } catch (error) {
          const codes = cancellationCodes(error);
          if (!codes) throw error;
          if (idempotency) {
            const { Item } = await client.send(
              new GetCommand({
                TableName: state,
                Key: { pk: idempotencyKey(run.tenantId, idempotency.key), sk: META },
                ConsistentRead: true,
              }),
            );
            if (Item) {
              const held = z.object({ runId: z.string(), requestHash: z.string() }).parse(Item);
              return { created: false, ...held };
            }
          }
          const holder = run.ticket && (await activeTicketRun(client, state, run.tenantId, run.ticket.id));
          if (run.ticket && holder) throw new TicketBusyError(run.ticket.id, holder);
          // Two creations raced on the same key or ticket and neither has committed yet: try again.
          if (!codes.includes('TransactionConflict') || attempt >= 5) throw error;
          await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
        }
      }
    },

    /** A ticket's runs in one tenant, newest first. */
    listByTicket: (tenantId, ticketId, options) => listTicketRuns(client, state, tenantId, ticketId, options),

    async list(tenantId, options) {
      const scope = { keys: ['pk', 'sk', 'gsi1sk'], bound: { gsi1pk: runsListKey(tenantId) } };
      // A status filter may leave a page short; the helper reads on until it is full or the index ends.
      const { items, lastKey } = await queryPages(
        client,
        {
          TableName: state,
          IndexName: 'gsi1',
          KeyConditionExpression: 'gsi1pk = :pk',
          ExpressionAttributeValues: {
            ':pk': runsListKey(tenantId),
            ...(options.status ? { ':status': options.status } : {}),
          },
          ...(options.status
            ? {
                FilterExpression: '#run.#status = :status',
                ExpressionAttributeNames: { '#run': 'run', '#status': 'status' },
              }
            : {}),
          ScanIndexForward: false,
        },
        (item) => runItemSchema.parse(item).run,
        { limit: options.limit, startKey: decodeCursor(options.cursor, scope) },
      );
      return { items, nextCursor: encodeCursor(lastKey, scope) };
    },

    async events(runId, since, limit) {
      const { items } = await queryPages(
        client,
        {
          TableName: eventsTable,
          KeyConditionExpression: 'runId = :r AND seq > :s',
          ExpressionAttributeValues: { ':r': runId, ':s': since },
          ConsistentRead: true,
        },
        (item) => runEventSchema.parse(item),
        { limit },
      );
      return items;
    },

    async activeRuns(before, limit = 100, after) {
      const { items } = await queryPages(
        client,
        {
          TableName: state,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk < :before',
          ExpressionAttributeValues: { ':pk': indexes.activeRuns, ':before': before.toISOString() },
        },
        recordOf,
        {
          limit,
          ...(after && {
            startKey: {
              gsi2pk: indexes.activeRuns,
              gsi2sk: `${after.createdAt}#${after.runId}`,
              pk: runKey(after.runId),
              sk: META,
            },
          }),
        },
      );
      return items;
    },
  };
}

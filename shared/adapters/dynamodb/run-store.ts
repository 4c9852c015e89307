import { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  type TransactWriteCommandInput,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import type { Page } from '../../app/ports.js';
import { type Run, runSchema, type StepExecution, stepExecutionSchema } from '../../domain/entities.js';
import { ConflictError } from '../../domain/errors.js';
import {
  type ChainHead,
  chainEvents,
  EMPTY_CHAIN,
  type EventDraft,
  type RunEvent,
  runEventSchema,
} from '../../domain/events.js';
import { type LeaseClaim, leaseClaimOf } from '../../domain/recovery.js';
import { runStateMachine, stepExecutionStateMachine, type RunStatus } from '../../domain/statuses.js';
import { TicketBusyError } from '../../domain/intake/ticket.js';
import { conditionally } from './conditional.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { activeTicketRun, listTicketRuns, ticketClaimItems, ticketReleaseItem } from './ticket-items.js';

export type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** Step executions holding a lease, by expiry (gsi2), so the reconciler finds the expired ones. */
const LEASES_INDEX = 'LEASES';
/** Runs not yet ended, by creation (gsi2), so the reconciler can check their executions. */
const ACTIVE_RUNS_INDEX = 'ACTIVE_RUNS';
const leaseIndexKey = (until: string, runId: string, executionId: string) => ({
  gsi2pk: LEASES_INDEX,
  gsi2sk: `${until}#${runId}#${executionId}`,
});

/**
 * A stored step execution. The lease expiry lives in its own attribute (`leaseUntil`), renewed
 * without rewriting the execution, so a writer that replaces the execution never moves it back.
 */
function executionOf(item: Record<string, unknown>): StepExecution {
  const execution = stepExecutionSchema.parse(item.se);
  return typeof item.leaseUntil === 'string' ? { ...execution, leaseExpiresAt: item.leaseUntil } : execution;
}

export const runKey = (runId: string) => `RUN#${runId}`;
const executionSk = (executionId: string) => `SE#${executionId}`;
export const aggregateSk = (kind: string, stepId: string, attempt: number) =>
  `AGG#${kind}#${stepId}#${String(attempt).padStart(4, '0')}`;
const idempotencyKey = (tenantId: string, key: string) => `TENANT#${tenantId}#IDEMP#${key}`;
const receiptKey = (key: string) => `RECEIPT#${key}`;
const runsListKey = (tenantId: string) => `TENANT#${tenantId}#RUNS`;

/** A run as stored: the entity, its chain head, and what the interpreter keeps beside it. */
export interface RunRecord {
  readonly run: Run;
  readonly head: ChainHead;
  readonly rollbackRequested: boolean;
  readonly executionArn?: string;
}

const runItemSchema = z.object({
  run: runSchema,
  chainSeq: z.number().int().min(0),
  chainHash: z.string(),
  rollbackRequested: z.boolean().default(false),
  executionArn: z.string().optional(),
});

function recordOf(item: Record<string, unknown>): RunRecord {
  const parsed = runItemSchema.parse(item);
  return {
    run: parsed.run,
    head: { seq: parsed.chainSeq, hash: parsed.chainHash },
    rollbackRequested: parsed.rollbackRequested,
    executionArn: parsed.executionArn,
  };
}

export const aggregateSchema = z.object({
  kind: z.enum(['step', 'rollback']),
  stepId: z.string(),
  attempt: z.number().int(),
  total: z.number().int(),
  done: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
  completed: z.boolean(),
  taskToken: z.string(),
});
export type Aggregate = z.infer<typeof aggregateSchema>;

export const receiptSchema = z.object({
  key: z.string(),
  executionId: z.string(),
  outcome: z.enum(['succeeded', 'failed', 'timed_out']),
  output: z.record(z.string(), z.json()).optional(),
  recordedAt: z.string(),
});
export type Receipt = z.infer<typeof receiptSchema>;

/** A change to a run: its events, the run's new fields, and other items written in the same transaction. */
export interface RunChange {
  readonly events: readonly EventDraft[];
  /** New values for run fields (the run entity is stored whole, so this is merged and re-validated). */
  readonly run?: Partial<Run>;
  readonly rollbackRequested?: boolean;
  readonly executionArn?: string;
  /** Further writes, each with its own condition; any failing condition aborts the whole change. */
  readonly writes?: readonly TransactItem[];
}

/** What `acquireLease` got: the lease, a lost execution to recover, or nothing to do. */
export type LeaseOutcome =
  | { readonly claim: 'lease' | 'lost'; readonly execution: StepExecution }
  | { readonly claim: Exclude<LeaseClaim, 'lease' | 'lost'> };

/** Thrown when a write's own condition failed (not the chain head): the change no longer applies. */
export class StaleWriteError extends Error {
  constructor(readonly reasons: readonly string[]) {
    super(`a conditional write failed: ${reasons.join(', ')}`);
    this.name = 'StaleWriteError';
  }
}

/**
 * Runs, step executions, aggregates, receipts and the event log. Every change to a run appends its
 * events in the same transaction, guarded by the run's chain head, so the log has no gap, no
 * duplicate seq and no event without its state (or state without its event).
 */
export function makeRunStore(client: DynamoDBDocumentClient, tables: { state: string; events: string }) {
  const { state, events: eventsTable } = tables;

  async function load(runId: string): Promise<RunRecord | undefined> {
    const { Item } = await client.send(
      new GetCommand({ TableName: state, Key: { pk: runKey(runId), sk: 'META' }, ConsistentRead: true }),
    );
    return Item ? recordOf(Item) : undefined;
  }

  function eventPuts(list: readonly RunEvent[]): TransactItem[] {
    return list.map((event) => ({
      Put: { TableName: eventsTable, Item: event, ConditionExpression: 'attribute_not_exists(seq)' },
    }));
  }

  /**
   * Applies `decide` to the current run and commits what it returns; when another writer moved
   * the chain first, reads again and decides again. `decide` returning undefined means nothing to do.
   */
  async function mutate(
    runId: string,
    decide: (record: RunRecord) => RunChange | undefined,
    attempts = 20,
  ): Promise<{ record: RunRecord; events: RunEvent[] } | undefined> {
    for (let attempt = 0; attempt < attempts; attempt++) {
      const record = await load(runId);
      if (!record) return undefined;
      const change = decide(record);
      if (!change) return undefined;
      const { events: chained, head } = chainEvents(record.head, record.run, change.events);
      const run = runSchema.parse({ ...record.run, ...change.run });
      const items: TransactItem[] = [
        {
          Update: {
            TableName: state,
            Key: { pk: runKey(runId), sk: 'META' },
            UpdateExpression:
              'SET #run = :run, chainSeq = :seq, chainHash = :hash, rollbackRequested = :rb' +
              (change.executionArn ? ', executionArn = :arn' : '') +
              (runStateMachine.isTerminal(run.status) ? ' REMOVE gsi2pk, gsi2sk' : ''),
            ConditionExpression: 'chainSeq = :expected',
            ExpressionAttributeNames: { '#run': 'run' },
            ExpressionAttributeValues: {
              ':run': run,
              ':seq': head.seq,
              ':hash': head.hash,
              ':rb': change.rollbackRequested ?? record.rollbackRequested,
              ':expected': record.head.seq,
              ...(change.executionArn ? { ':arn': change.executionArn } : {}),
            },
          },
        },
        ...eventPuts(chained),
        ...(change.writes ?? []),
      ];
      // The run that ends frees its ticket for the next one, in the same transaction.
      const release = !runStateMachine.isTerminal(record.run.status) && runStateMachine.isTerminal(run.status);
      const freed = release ? ticketReleaseItem(state, run) : undefined;
      if (freed) items.push(freed);
      try {
        await client.send(new TransactWriteCommand({ TransactItems: items }));
        return { record: { ...record, run, head }, events: chained };
      } catch (error) {
        if (!(error instanceof TransactionCanceledException)) throw error;
        const codes = (error.CancellationReasons ?? []).map((r) => r.Code ?? 'None');
        // The chain head moved (another writer appended first): decide again on fresh state.
        const headMoved = codes[0] === 'ConditionalCheckFailed' || codes.includes('TransactionConflict');
        if (!headMoved) {
          if (codes.includes('ConditionalCheckFailed')) throw new StaleWriteError(codes);
          throw error;
        }
        await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
      }
    }
    throw new ConflictError(`the run ${runId} is changing too fast; try again`);
  }

  return {
    load,
    mutate,

    /**
     * Stores a new run with its first event and its idempotency record. Resolves the run id that
     * holds the key: this run's, or the one an earlier request with the same key created.
     */
    async create(
      run: Run,
      firstEvents: readonly EventDraft[],
      idempotency: { key: string; requestHash: string } | undefined,
    ): Promise<{ created: true } | { created: false; runId: string; requestHash: string }> {
      const { events: chained, head } = chainEvents(EMPTY_CHAIN, run, firstEvents);
      const items: TransactItem[] = [
        {
          Put: {
            TableName: state,
            Item: {
              pk: runKey(run.runId),
              sk: 'META',
              gsi1pk: runsListKey(run.tenantId),
              gsi1sk: `${run.createdAt}#${run.runId}`,
              gsi2pk: ACTIVE_RUNS_INDEX,
              gsi2sk: `${run.createdAt}#${run.runId}`,
              run,
              chainSeq: head.seq,
              chainHash: head.hash,
              rollbackRequested: false,
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
              sk: 'META',
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
          return { created: true };
        } catch (error) {
          if (!(error instanceof TransactionCanceledException)) throw error;
          if (idempotency) {
            const { Item } = await client.send(
              new GetCommand({
                TableName: state,
                Key: { pk: idempotencyKey(run.tenantId, idempotency.key), sk: 'META' },
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
          const conflict = (error.CancellationReasons ?? []).some((r) => r.Code === 'TransactionConflict');
          if (!conflict || attempt >= 5) throw error;
          await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
        }
      }
    },

    async list(tenantId: string, options: { status?: RunStatus; limit: number; cursor?: string }): Promise<Page<Run>> {
      const items: Run[] = [];
      const scope = { keys: ['pk', 'sk', 'gsi1sk'], bound: { gsi1pk: runsListKey(tenantId) } };
      let startKey: Record<string, unknown> | undefined = decodeCursor(options.cursor, scope);
      // A status filter may leave a page short; keep reading until it is full or the index ends.
      do {
        const page = await client.send(
          new QueryCommand({
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
            Limit: options.limit - items.length,
            ExclusiveStartKey: startKey,
          }),
        );
        for (const item of page.Items ?? []) items.push(runItemSchema.parse(item).run);
        startKey = page.LastEvaluatedKey;
      } while (startKey && items.length < options.limit);
      return { items, nextCursor: encodeCursor(startKey, scope) };
    },

    /** A ticket's runs in one tenant, newest first. */
    listByTicket: (tenantId: string, ticketId: string, options: { limit: number; cursor?: string }) =>
      listTicketRuns(client, state, tenantId, ticketId, options),

    async executions(runId: string): Promise<StepExecution[]> {
      const found: StepExecution[] = [];
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new QueryCommand({
            TableName: state,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :se)',
            ExpressionAttributeValues: { ':pk': runKey(runId), ':se': 'SE#' },
            ConsistentRead: true,
            ExclusiveStartKey: startKey,
          }),
        );
        for (const item of page.Items ?? []) found.push(executionOf(item));
        startKey = page.LastEvaluatedKey;
      } while (startKey);
      return found;
    },

    async execution(runId: string, executionId: string): Promise<StepExecution | undefined> {
      const { Item } = await client.send(
        new GetCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: executionSk(executionId) },
          ConsistentRead: true,
        }),
      );
      return Item ? executionOf(Item) : undefined;
    },

    /** A Put of a new step execution (fails the change if it exists). */
    putExecution(execution: StepExecution): TransactItem {
      return {
        Put: {
          TableName: state,
          Item: {
            pk: runKey(execution.runId),
            sk: executionSk(execution.executionId),
            se: execution,
            status: execution.status,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    },

    /** Replaces an execution, provided it is still in `from` (and, when given, leased by `owner`). */
    updateExecution(execution: StepExecution, from: readonly string[], owner?: string): TransactItem {
      const values: Record<string, unknown> = { ':e': execution, ':s': execution.status };
      from.forEach((status, i) => (values[`:f${i}`] = status));
      if (owner) values[':owner'] = owner;
      return {
        Update: {
          TableName: state,
          Key: { pk: runKey(execution.runId), sk: executionSk(execution.executionId) },
          UpdateExpression:
            'SET se = :e, #status = :s' +
            (stepExecutionStateMachine.isTerminal(execution.status) ? ' REMOVE gsi2pk, gsi2sk, leaseUntil' : ''),
          ConditionExpression:
            `#status IN (${from.map((_, i) => `:f${i}`).join(', ')})` + (owner ? ' AND se.leaseOwner = :owner' : ''),
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: values,
        },
      };
    },

    /**
     * Takes the lease of an execution when `leaseClaimOf` allows it: pending, or leased by a holder
     * that stopped renewing before it started. An execution whose holder was lost mid-action is
     * never taken over: the caller gets it back as `lost`, to end it by the recovery rule.
     */
    async acquireLease(
      runId: string,
      executionId: string,
      owner: string,
      now: Date,
      leaseMs: number,
    ): Promise<LeaseOutcome> {
      const current = await this.execution(runId, executionId);
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
                ':ipk': LEASES_INDEX,
                ':isk': leaseIndexKey(leased.leaseExpiresAt ?? '', runId, executionId).gsi2sk,
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

    /** Extends a lease the caller holds; false when it no longer holds it. */
    async renewLease(runId: string, executionId: string, owner: string, until: Date): Promise<boolean> {
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
              ':isk': leaseIndexKey(until.toISOString(), runId, executionId).gsi2sk,
              ':owner': owner,
              ':leased': 'leased',
              ':running': 'running',
            },
          }),
        );
        return true;
      }, false);
    },

    /** Step executions whose lease expired before `now`, oldest first. */
    async expiredLeases(now: Date, limit = 100): Promise<Array<{ runId: string; executionId: string }>> {
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: state,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk < :now',
          ExpressionAttributeValues: { ':pk': LEASES_INDEX, ':now': now.toISOString() },
          Limit: limit,
        }),
      );
      return Items.map((item) => {
        const se = stepExecutionSchema.parse(item.se);
        return { runId: se.runId, executionId: se.executionId };
      });
    },

    /**
     * Ends an execution whose lease expired: only while it is still leased or running and its lease
     * has not been renewed since `now`.
     */
    expireExecution(execution: StepExecution, now: Date): TransactItem {
      return {
        Update: {
          TableName: state,
          Key: { pk: runKey(execution.runId), sk: executionSk(execution.executionId) },
          UpdateExpression: 'SET se = :e, #status = :s REMOVE gsi2pk, gsi2sk, leaseUntil',
          ConditionExpression: '#status IN (:leased, :running) AND leaseUntil < :now',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':e': execution,
            ':s': execution.status,
            ':leased': 'leased',
            ':running': 'running',
            ':now': now.toISOString(),
          },
        },
      };
    },

    /** Keeps the task token of a waiting interpreter task (`resume`, `approval`), replacing an older one. */
    async putWaitToken(runId: string, waitingFor: string, taskToken: string, at: string): Promise<void> {
      await client.send(
        new PutCommand({
          TableName: state,
          Item: { pk: runKey(runId), sk: `WAIT#${waitingFor}`, taskToken, at },
        }),
      );
    },

    /**
     * Takes a waiting task's token, so exactly one caller resumes it: the request that ended the
     * wait, or the task itself when the wait ended before its token was stored.
     */
    async claimWaitToken(runId: string, waitingFor: string): Promise<string | undefined> {
      const { Attributes } = await client.send(
        new DeleteCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: `WAIT#${waitingFor}` },
          ReturnValues: 'ALL_OLD',
        }),
      );
      return typeof Attributes?.taskToken === 'string' ? Attributes.taskToken : undefined;
    },

    /** Every aggregate of a run (one per step or rollback attempt). */
    async aggregates(runId: string): Promise<Aggregate[]> {
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: state,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :agg)',
          ExpressionAttributeValues: { ':pk': runKey(runId), ':agg': 'AGG#' },
          ConsistentRead: true,
        }),
      );
      return Items.map((item) => aggregateSchema.parse(item));
    },

    /** Runs not ended yet that were created before `before`, oldest first. */
    async activeRuns(before: Date, limit = 100): Promise<RunRecord[]> {
      const { Items = [] } = await client.send(
        new QueryCommand({
          TableName: state,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk AND gsi2sk < :before',
          ExpressionAttributeValues: { ':pk': ACTIVE_RUNS_INDEX, ':before': before.toISOString() },
          Limit: limit,
        }),
      );
      return Items.map(recordOf);
    },

    async aggregate(runId: string, kind: string, stepId: string, attempt: number): Promise<Aggregate | undefined> {
      const { Item } = await client.send(
        new GetCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
          ConsistentRead: true,
        }),
      );
      return Item ? aggregateSchema.parse(Item) : undefined;
    },

    putAggregate(runId: string, aggregate: Aggregate): TransactItem {
      return {
        Put: {
          TableName: state,
          Item: {
            pk: runKey(runId),
            sk: aggregateSk(aggregate.kind, aggregate.stepId, aggregate.attempt),
            ...aggregate,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    },

    /** Gives an aggregate the token of the task now waiting for it (after a re-dispatch). */
    async setAggregateToken(runId: string, kind: string, stepId: string, attempt: number, taskToken: string) {
      await client.send(
        new UpdateCommand({
          TableName: state,
          Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
          UpdateExpression: 'SET taskToken = :t',
          ExpressionAttributeValues: { ':t': taskToken },
        }),
      );
    },

    /** Counts one target's result into its step's aggregate, in the same transaction as the result. */
    countResult(runId: string, kind: string, stepId: string, attempt: number, succeeded: boolean): TransactItem {
      return {
        Update: {
          TableName: state,
          Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
          UpdateExpression: 'ADD #done :one, #outcome :one',
          ConditionExpression: 'attribute_exists(pk) AND #done < #total',
          ExpressionAttributeNames: {
            '#done': 'done',
            '#total': 'total',
            '#outcome': succeeded ? 'succeeded' : 'failed',
          },
          ExpressionAttributeValues: { ':one': 1 },
        },
      };
    },

    /**
     * Counts `count` executions that ended before reaching a worker (failed or cancelled) into
     * their step's aggregate; `total` guards against counting past the step's targets.
     */
    countUnsent(
      runId: string,
      kind: string,
      stepId: string,
      attempt: number,
      count: number,
      total: number,
    ): TransactItem {
      return {
        Update: {
          TableName: state,
          Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
          UpdateExpression: 'ADD #done :n, #failed :n',
          ConditionExpression: 'attribute_exists(pk) AND #done <= :max',
          ExpressionAttributeNames: { '#done': 'done', '#failed': 'failed' },
          ExpressionAttributeValues: { ':n': count, ':max': total - count },
        },
      };
    },

    /**
     * Marks an aggregate complete if every target is done and nobody marked it first. Exactly one
     * caller gets the aggregate back, with the task token to resume.
     */
    async claimCompletion(
      runId: string,
      kind: string,
      stepId: string,
      attempt: number,
    ): Promise<Aggregate | undefined> {
      return conditionally(async () => {
        const { Attributes } = await client.send(
          new UpdateCommand({
            TableName: state,
            Key: { pk: runKey(runId), sk: aggregateSk(kind, stepId, attempt) },
            UpdateExpression: 'SET #completed = :true',
            ConditionExpression: '#completed = :false AND #done = #total',
            ExpressionAttributeNames: { '#completed': 'completed', '#done': 'done', '#total': 'total' },
            ExpressionAttributeValues: { ':true': true, ':false': false },
            ReturnValues: 'ALL_NEW',
          }),
        );
        return aggregateSchema.parse(Attributes);
      }, undefined);
    },

    async receipt(key: string): Promise<Receipt | undefined> {
      const { Item } = await client.send(
        new GetCommand({ TableName: state, Key: { pk: receiptKey(key), sk: 'META' }, ConsistentRead: true }),
      );
      return Item ? receiptSchema.parse(Item.receipt) : undefined;
    },

    putReceipt(receipt: Receipt): TransactItem {
      return {
        Put: {
          TableName: state,
          Item: { pk: receiptKey(receipt.key), sk: 'META', receipt },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      };
    },

    /** Events after `since`, in seq order, at most `limit`. */
    async events(runId: string, since: number, limit: number): Promise<RunEvent[]> {
      const found: RunEvent[] = [];
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new QueryCommand({
            TableName: eventsTable,
            KeyConditionExpression: 'runId = :r AND seq > :s',
            ExpressionAttributeValues: { ':r': runId, ':s': since },
            ConsistentRead: true,
            Limit: limit - found.length,
            ExclusiveStartKey: startKey,
          }),
        );
        for (const item of page.Items ?? []) found.push(runEventSchema.parse(item));
        startKey = page.LastEvaluatedKey;
      } while (startKey && found.length < limit);
      return found;
    },
  };
}

export type RunStore = ReturnType<typeof makeRunStore>;

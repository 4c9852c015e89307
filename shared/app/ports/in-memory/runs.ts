import { type Approval, type Run, runSchema, type StepExecution } from '../../../domain/entities.js';
import { ConflictError, StaleWriteError } from '../../../domain/errors.js';
import { chainEvents, EMPTY_CHAIN, type RunEvent } from '../../../domain/events.js';
import { chainOrder, inboxOrderKey, SEQUENCE_BATCH, type StagedEvent } from '../../../domain/inbox.js';
import { TicketBusyError } from '../../../domain/intake/ticket.js';
import { leaseClaimOf } from '../../../domain/recovery.js';
import type { Aggregate, Receipt } from '../../../domain/step-records.js';
import { runStateMachine, stepExecutionStateMachine } from '../../../domain/statuses.js';
import type { ApprovalStore } from '../approvals.js';
import type { CarriedRun, RunRecord, RunStore } from '../runs.js';
import type { WriteIntent } from '../writes.js';
import { applyAdmissionWrite, type CellMap, releasesOnEndOf } from './admission.js';

interface StoredRun {
  record: RunRecord;
  rev: number;
  active: boolean;
}

const aggregateId = (runId: string, kind: string, stepId: string, attempt: number) =>
  `${runId}/${kind}/${stepId}/${attempt}`;
const clone = <T>(value: T): T => structuredClone(value);

/** Open gates' due time, as the DynamoDB adapter indexes them. */
const dueAt = (a: Approval) =>
  a.status === 'requested' ? a.slaDeadline : a.status === 'escalated' ? a.hardDeadline : undefined;

/**
 * Every run port in memory, with the DynamoDB adapter's semantics: a change commits all or
 * nothing, a write whose condition fails refuses the change with `StaleWriteError`, and a held
 * record that is no longer current is decided again on fresh state. For use-case tests.
 */
export function makeInMemoryStores(): {
  runs: RunStore;
  approvals: ApprovalStore;
  readonly requests: Map<string, number>;
  /** Admission cells, shared with `makeInMemoryAdmissionStore`. */
  readonly cells: CellMap;
} {
  const cells: CellMap = new Map();
  const runs = new Map<string, StoredRun>();
  const events = new Map<string, RunEvent[]>();
  const executions = new Map<string, StepExecution>();
  const aggregates = new Map<string, Aggregate>();
  const receipts = new Map<string, Receipt>();
  const waits = new Map<string, string>();
  const approvals = new Map<string, Approval>();
  const idempotency = new Map<string, { runId: string; requestHash: string }>();
  const revisions = new WeakMap<RunRecord, number>();
  /** Reads and writes by kind, so tests can hold a use case to its budget. */
  const requests = new Map<string, number>();
  const count = (op: string) => requests.set(op, (requests.get(op) ?? 0) + 1);

  const remember = (stored: StoredRun): RunRecord => {
    const record = clone(stored.record);
    revisions.set(record, stored.rev);
    return record;
  };

  /** Applies one intent to `tx` (copies of the maps); false when its condition fails. */
  function apply(
    intent: WriteIntent,
    tx: {
      executions: Map<string, StepExecution>;
      aggregates: Map<string, Aggregate>;
      receipts: Map<string, Receipt>;
      approvals: Map<string, Approval>;
      cells: CellMap;
    },
  ): boolean {
    switch (intent.kind) {
      case 'takeCounter':
      case 'addCounter':
      case 'putCell':
      case 'deleteCell':
        return applyAdmissionWrite(intent, tx.cells);
      case 'claimTicket':
        return !ticketHolder(intent.tenantId, intent.ticketId, intent.runId);
      case 'putExecution':
        if (tx.executions.has(intent.execution.executionId)) return false;
        tx.executions.set(intent.execution.executionId, clone(intent.execution));
        return true;
      case 'updateExecution': {
        const current = tx.executions.get(intent.execution.executionId);
        if (!current || !intent.from.includes(current.status)) return false;
        if (intent.owner !== undefined && current.leaseOwner !== intent.owner) return false;
        const next = clone(intent.execution);
        // The lease expiry is renewed apart from the execution; replacing it never moves it back.
        if (stepExecutionStateMachine.isTerminal(next.status)) delete next.leaseExpiresAt;
        else if (current.leaseExpiresAt !== undefined) next.leaseExpiresAt = current.leaseExpiresAt;
        tx.executions.set(next.executionId, next);
        return true;
      }
      case 'expireExecution': {
        const current = tx.executions.get(intent.execution.executionId);
        if (!current || !['leased', 'running'].includes(current.status)) return false;
        if (current.leaseExpiresAt === undefined || current.leaseExpiresAt >= intent.now.toISOString()) return false;
        const next = clone(intent.execution);
        delete next.leaseExpiresAt;
        tx.executions.set(next.executionId, next);
        return true;
      }
      case 'putAggregate': {
        const { aggregate: a, runId } = intent;
        const id = aggregateId(runId, a.kind, a.stepId, a.attempt);
        if (tx.aggregates.has(id)) return false;
        tx.aggregates.set(id, clone(a));
        return true;
      }
      case 'countResult':
      case 'countUnsent': {
        const { ref } = intent;
        const id = aggregateId(ref.runId, ref.stepKind, ref.stepId, ref.attempt);
        const a = tx.aggregates.get(id);
        if (!a) return false;
        if (intent.kind === 'countResult') {
          if (a.done >= a.total) return false;
          if (intent.completes && (a.total !== 1 || a.completed)) return false;
          const outcome = intent.succeeded ? 'succeeded' : 'failed';
          tx.aggregates.set(id, {
            ...a,
            done: a.done + 1,
            [outcome]: a[outcome] + 1,
            ...(intent.completes && { completed: true }),
          });
        } else {
          if (a.done > intent.total - intent.count) return false;
          tx.aggregates.set(id, { ...a, done: a.done + intent.count, failed: a.failed + intent.count });
        }
        return true;
      }
      case 'releaseTargets':
      case 'skipTargets': {
        const { ref } = intent;
        const id = aggregateId(ref.runId, ref.stepKind, ref.stepId, ref.attempt);
        const a = tx.aggregates.get(id);
        if (!a || (a.released ?? 0) !== intent.from) return false;
        tx.aggregates.set(
          id,
          intent.kind === 'releaseTargets'
            ? { ...a, released: intent.to }
            : {
                ...a,
                released: intent.from + intent.count,
                done: a.done + intent.count,
                skipped: (a.skipped ?? 0) + intent.count,
              },
        );
        return true;
      }
      case 'putReceipt':
        if (tx.receipts.has(intent.receipt.key)) return false;
        tx.receipts.set(intent.receipt.key, clone(intent.receipt));
        return true;
      case 'putApproval': {
        const id = `${intent.approval.runId}/${intent.approval.approvalId}`;
        if (tx.approvals.has(id)) return false;
        tx.approvals.set(id, clone(intent.approval));
        return true;
      }
      case 'updateApproval': {
        const id = `${intent.approval.runId}/${intent.approval.approvalId}`;
        const current = tx.approvals.get(id);
        if (!current || current.status !== intent.was.status) return false;
        if (current.decisions.length !== intent.was.decisions.length) return false;
        tx.approvals.set(id, clone(intent.approval));
        return true;
      }
    }
  }

  /** The run other than `runId` that holds a ticket: not ended, and not still queued behind another. */
  function ticketHolder(tenantId: string, ticketId: string, runId: string): string | undefined {
    return [...runs.values()].find(
      (s) =>
        s.active &&
        s.record.run.runId !== runId &&
        s.record.run.tenantId === tenantId &&
        s.record.run.ticket?.id === ticketId &&
        s.record.run.queuedBehind === undefined &&
        !runStateMachine.isTerminal(s.record.run.status),
    )?.record.run.runId;
  }

  /** A run's step executions, in id order. */
  const executionsOf = (runId: string): StepExecution[] =>
    [...executions.values()]
      .filter((e) => e.runId === runId)
      .sort((a, b) => a.executionId.localeCompare(b.executionId))
      .map(clone);

  async function load(runId: string): Promise<RunRecord | undefined> {
    count('load');
    const stored = runs.get(runId);
    return stored ? remember(stored) : undefined;
  }

  const carry = (record: RunRecord): CarriedRun | undefined => {
    const revision = revisions.get(record);
    return revision === undefined ? undefined : { record: clone(record), revision };
  };

  const hold = (carried: CarriedRun): RunRecord => {
    const record = clone(carried.record);
    // Every run here has a revision: none (a run stored before revisions, in DynamoDB) matches no
    // run, so the write is refused and the run read again.
    revisions.set(record, carried.revision ?? Number.NaN);
    return record;
  };

  const approvalStore: ApprovalStore = {
    async list(runId) {
      count('query');
      return [...approvals.values()]
        .filter((a) => a.runId === runId)
        .sort((a, b) => a.requestedAt.localeCompare(b.requestedAt))
        .map(clone);
    },
    async get(runId, approvalId) {
      count('get');
      const found = approvals.get(`${runId}/${approvalId}`);
      return found && clone(found);
    },
    async due(now, limit = 100) {
      count('query');
      return [...approvals.values()]
        .flatMap((a) => {
          const at = dueAt(a);
          return at !== undefined && at <= now.toISOString() ? [{ at, a }] : [];
        })
        .sort((x, y) => x.at.localeCompare(y.at))
        .slice(0, limit)
        .map(({ a }) => ({ runId: a.runId, approvalId: a.approvalId }));
    },
  };

  /**
   * Applies `writes` all or nothing; throws `StaleWriteError` (with `before` the codes of the items
   * ahead of them) when one's condition fails.
   */
  function commitWrites(
    writes: readonly WriteIntent[],
    before: readonly string[],
    prepare?: (tx: { cells: CellMap }) => void,
  ): void {
    const tx = {
      executions: new Map(executions),
      aggregates: new Map(aggregates),
      receipts: new Map(receipts),
      approvals: new Map(approvals),
      cells: new Map(cells),
    };
    prepare?.(tx);
    const refused = writes.map((w) => (apply(w, tx) ? 'None' : 'ConditionalCheckFailed'));
    if (refused.includes('ConditionalCheckFailed')) throw new StaleWriteError([...before, ...refused]);
    for (const [name, map] of Object.entries(tx)) {
      const target = { executions, aggregates, receipts, approvals, cells }[name as keyof typeof tx] as Map<
        string,
        unknown
      >;
      target.clear();
      for (const [k, v] of map as Map<string, unknown>) target.set(k, v);
    }
  }

  /** Each run's inbox: staged events not yet in its chain. */
  const inboxes = new Map<string, StagedEvent[]>();

  const runStore: RunStore = {
    load,
    carry,
    hold,

    async stage(runId, staged, writes) {
      count('transact');
      const inbox = inboxes.get(runId) ?? [];
      const keys = new Set(inbox.map(inboxOrderKey));
      if (staged.some((s) => keys.has(inboxOrderKey(s)))) throw new StaleWriteError(['ConditionalCheckFailed']);
      commitWrites(
        writes,
        staged.map(() => 'None'),
      );
      inboxes.set(runId, [...inbox, ...clone(staged)]);
    },

    async sequence(runId) {
      for (;;) {
        count('query');
        const inbox = inboxes.get(runId) ?? [];
        const stored = runs.get(runId);
        if (inbox.length === 0 || !stored) return;
        const ordered = [...inbox].sort((a, b) => inboxOrderKey(a).localeCompare(inboxOrderKey(b)));
        const batch = chainOrder(ordered.slice(0, SEQUENCE_BATCH));
        count('transact');
        const { events: chained, head } = chainEvents(
          stored.record.head,
          stored.record.run,
          batch.map((s) => s.event),
        );
        runs.set(runId, { ...stored, record: { ...stored.record, head }, rev: stored.rev + 1 });
        events.set(runId, [...(events.get(runId) ?? []), ...clone(chained)]);
        const taken = new Set(batch);
        inboxes.set(
          runId,
          inbox.filter((s) => !taken.has(s)),
        );
      }
    },

    async stalledInboxes(before, limit = 100) {
      return [...inboxes.entries()]
        .filter(([, inbox]) => inbox.some((s) => s.at < before.toISOString()))
        .map(([runId]) => runId)
        .slice(0, limit);
    },

    async mutate(runId, decide, known) {
      let held = known && revisions.has(known) ? known : undefined;
      for (let attempt = 0; attempt < 20; attempt++) {
        const record = held ?? (await load(runId));
        held = undefined;
        if (!record) return undefined;
        const change = decide(record);
        if (!change) return undefined;
        count('transact');
        const stored = runs.get(runId);
        if (
          !stored ||
          stored.rev !== revisions.get(record) ||
          stored.record.head.seq !== record.head.seq ||
          stored.record.head.hash !== record.head.hash ||
          stored.record.run.tenantId !== record.run.tenantId
        )
          continue;
        const { events: chained, head } = chainEvents(record.head, record.run, change.events);
        const run = runSchema.parse({ ...record.run, ...change.run });
        const ending = !runStateMachine.isTerminal(record.run.status) && runStateMachine.isTerminal(run.status);
        commitWrites(change.writes ?? [], ['None'], (tx) => {
          if (ending) for (const w of releasesOnEndOf(record.run, run)) applyAdmissionWrite(w, tx.cells);
        });
        const next: StoredRun = {
          record: {
            run,
            head,
            rollbackRequested: change.rollbackRequested ?? record.rollbackRequested,
            executionArn: change.executionArn ?? record.executionArn,
          },
          rev: stored.rev + 1,
          active: stored.active && !runStateMachine.isTerminal(run.status),
        };
        runs.set(runId, next);
        events.set(runId, [...(events.get(runId) ?? []), ...clone(chained)]);
        return { record: remember(next), events: chained };
      }
      throw new ConflictError(`the run ${runId} is changing too fast; try again`);
    },

    async append(run, change, known) {
      let head = known;
      for (let attempt = 0; attempt < 20; attempt++) {
        if (!head) {
          count('get');
          const found = runs.get(run.runId)?.record;
          if (found?.run.tenantId !== run.tenantId)
            throw new Error(`run ${run.runId} does not exist in tenant ${run.tenantId}`);
          head = found.head;
        }
        count('transact');
        const stored = runs.get(run.runId);
        if (!stored) throw new Error(`run ${run.runId} does not exist`);
        const { head: at, run: current } = stored.record;
        if (at.seq !== head.seq || at.hash !== head.hash || current.tenantId !== run.tenantId) {
          head = undefined;
          continue;
        }
        const { events: chained, head: next } = chainEvents(head, run, change.events);
        commitWrites(change.writes ?? [], ['None']);
        runs.set(run.runId, { ...stored, record: { ...stored.record, head: next }, rev: stored.rev + 1 });
        events.set(run.runId, [...(events.get(run.runId) ?? []), ...clone(chained)]);
        return { head: next, events: chained };
      }
      throw new ConflictError(`the run ${run.runId} is changing too fast; try again`);
    },

    async create(run: Run, firstEvents, idem) {
      count('transact');
      const idemKey = idem && `${run.tenantId}/${idem.key}`;
      if (idemKey) {
        const held = idempotency.get(idemKey);
        if (held) return { created: false, ...held };
      }
      if (runs.has(run.runId)) throw new StaleWriteError(['ConditionalCheckFailed']);
      if (run.ticket && run.queuedBehind === undefined) {
        const holder = ticketHolder(run.tenantId, run.ticket.id, run.runId);
        if (holder) throw new TicketBusyError(run.ticket.id, holder);
      }
      const { events: chained, head } = chainEvents(EMPTY_CHAIN, run, firstEvents);
      const stored: StoredRun = { record: { run: clone(run), head, rollbackRequested: false }, rev: 0, active: true };
      runs.set(run.runId, stored);
      events.set(run.runId, clone(chained));
      if (idem && idemKey) idempotency.set(idemKey, { runId: run.runId, requestHash: idem.requestHash });
      return { created: true, record: remember(stored) };
    },

    async list(tenantId, options) {
      count('query');
      const all = [...runs.values()]
        .map((s) => s.record.run)
        .filter((r) => r.tenantId === tenantId && (!options.status || r.status === options.status))
        .sort((a, b) => `${b.createdAt}#${b.runId}`.localeCompare(`${a.createdAt}#${a.runId}`));
      const start = options.cursor ? Number(options.cursor) : 0;
      const items = all.slice(start, start + options.limit).map(clone);
      const end = start + items.length;
      return { items, ...(end < all.length && { nextCursor: String(end) }) };
    },

    async listByTicket(tenantId, ticketId, options) {
      count('query');
      const all = [...runs.values()]
        .map((s) => s.record.run)
        .filter((r) => r.tenantId === tenantId && r.ticket?.id === ticketId)
        .sort((a, b) => `${b.createdAt}#${b.runId}`.localeCompare(`${a.createdAt}#${a.runId}`));
      const start = options.cursor ? Number(options.cursor) : 0;
      const items = all.slice(start, start + options.limit).map(clone);
      const end = start + items.length;
      return { items, ...(end < all.length && { nextCursor: String(end) }) };
    },

    async events(runId, since, limit) {
      count('query');
      return clone((events.get(runId) ?? []).filter((e) => e.seq > since).slice(0, limit));
    },

    async activeRuns(before, limit = 100, after) {
      count('query');
      const position = (run: Pick<Run, 'createdAt' | 'runId'>) => `${run.createdAt}#${run.runId}`;
      return [...runs.values()]
        .filter((s) => s.active && s.record.run.createdAt < before.toISOString())
        .filter((s) => after === undefined || position(s.record.run) > position(after))
        .sort((a, b) => position(a.record.run).localeCompare(position(b.record.run)))
        .slice(0, limit)
        .map(remember);
    },

    async snapshot(runId) {
      count('query');
      const stored = runs.get(runId);
      return stored && { record: remember(stored), executions: executionsOf(runId) };
    },

    async executions(runId) {
      count('query');
      return executionsOf(runId);
    },

    async execution(runId, executionId) {
      count('get');
      const found = executions.get(executionId);
      return found?.runId === runId ? clone(found) : undefined;
    },

    async acquireLease(runId, executionId, owner, now, leaseMs) {
      // One conditional update; the read happens only when it is refused, as in DynamoDB.
      count('update');
      const current = executions.get(executionId);
      const claim = current && current.runId === runId ? leaseClaimOf(current, now) : 'ended';
      if (claim !== 'lease') count('get');
      if (!current || claim === 'ended') return { claim: 'ended' };
      if (claim === 'lost') return { claim, execution: clone(current) };
      if (claim !== 'lease') return { claim };
      const leased: StepExecution = {
        ...current,
        status: 'leased',
        leaseOwner: owner,
        leaseExpiresAt: new Date(now.getTime() + leaseMs).toISOString(),
      };
      executions.set(executionId, leased);
      return { claim: 'lease', execution: clone(leased) };
    },

    async renewLease(runId, executionId, owner, until) {
      count('update');
      const current = executions.get(executionId);
      if (!current || current.runId !== runId || current.leaseOwner !== owner) return false;
      if (!['leased', 'running'].includes(current.status)) return false;
      executions.set(executionId, { ...current, leaseExpiresAt: until.toISOString() });
      return true;
    },

    async expiredLeases(now, limit = 100) {
      count('query');
      return [...executions.values()]
        .filter((e) => ['leased', 'running'].includes(e.status) && (e.leaseExpiresAt ?? '~') < now.toISOString())
        .sort((a, b) => (a.leaseExpiresAt ?? '').localeCompare(b.leaseExpiresAt ?? ''))
        .slice(0, limit)
        .map((e) => ({ runId: e.runId, executionId: e.executionId }));
    },

    async aggregates(runId) {
      count('query');
      return [...aggregates.entries()].filter(([id]) => id.startsWith(`${runId}/`)).map(([, a]) => clone(a));
    },

    async aggregate(runId, kind, stepId, attempt) {
      count('get');
      const found = aggregates.get(aggregateId(runId, kind, stepId, attempt));
      return found && clone(found);
    },

    async setAggregateToken(runId, kind, stepId, attempt, taskToken) {
      count('update');
      const id = aggregateId(runId, kind, stepId, attempt);
      const found = aggregates.get(id);
      if (!found) return undefined;
      aggregates.set(id, { ...found, taskToken });
      return clone({ ...found, taskToken });
    },

    async claimCompletion(runId, kind, stepId, attempt) {
      count('update');
      const id = aggregateId(runId, kind, stepId, attempt);
      const found = aggregates.get(id);
      if (!found || found.completed || found.done !== found.total) return undefined;
      const completed = { ...found, completed: true };
      aggregates.set(id, completed);
      return clone(completed);
    },

    async receipt(key) {
      count('get');
      const found = receipts.get(key);
      return found && clone(found);
    },

    async putWaitToken(runId, waitingFor, taskToken) {
      count('put');
      waits.set(`${runId}/${waitingFor}`, taskToken);
    },

    async claimWaitToken(runId, waitingFor) {
      count('delete');
      const key = `${runId}/${waitingFor}`;
      const token = waits.get(key);
      waits.delete(key);
      return token;
    },
  };

  return { runs: runStore, approvals: approvalStore, requests, cells };
}

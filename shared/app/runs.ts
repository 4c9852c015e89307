import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Admission, AdmissionReadAhead } from './admission.js';
import type { ApprovalStore } from './ports/approvals.js';
import type { RunRecord, RunStore } from './ports/runs.js';
import { carriedOf } from './carried.js';
import { canonicalJson, type Json, sha256Hex } from '../domain/canonical.js';
import { type Principal, prioritySchema, type Run, ticketSchema, type Trigger } from '../domain/entities.js';
import { MAX_INPUTS_BYTES, storableJsonObject } from '../domain/storable.js';
import { ConflictError, NotFoundError, ValidationError } from '../domain/errors.js';
import { TicketBusyError } from '../domain/intake/ticket.js';
import { lastInLine } from './ticket-queue.js';
import type { RunEvent } from '../domain/events.js';
import { parseRunbookObject, resolveInputs, type Runbook } from '../domain/runbook.js';
import { RUN_STATUSES, runStateMachine, type RunStatus } from '../domain/statuses.js';
import type { Clock, Page, RunbookStore } from './ports.js';
import type { TaskCallbacks } from './ports/interpreter.js';
import { runErrorView, waitingForView } from './run-reasons.js';
import { stepViews } from './step-views.js';
import { CANCELLED_UNSENT, endUnsent } from './unsent.js';
import { wakeAll } from './waits.js';
import { cancelChange, rollbackChange } from './run-requests.js';
import { heldByAdmission } from '../domain/admission/held.js';
import { draft } from './drafts.js';

/** Starts the interpreter for a run; the execution name is the run id, so a retry cannot start it twice. */
import type { RunStarter } from './ports/interpreter.js';

export type { RunStarter };

export interface RunDeps {
  readonly runbooks: RunbookStore;
  readonly runs: RunStore;
  readonly starter: RunStarter;
  readonly clock: Clock;
  /** Resumes waiting interpreter tasks (a cancel or rollback of a run held by a gate or an operator). */
  readonly callbacks: TaskCallbacks;
  /** Quotas, limits, breakers and dependencies; without it every run starts at once. */
  readonly admission?: Admission;
}

export const createRunBodySchema = z.strictObject({
  runbookId: z.string().min(1).max(64),
  version: z.number().int().positive().optional(),
  inputs: storableJsonObject(MAX_INPUTS_BYTES).default({}),
  ticket: ticketSchema.optional(),
  priority: prioritySchema.default('normal'),
  /** Runs of the same tenant that must succeed first. */
  dependsOn: z.array(z.string().min(1).max(100)).max(50).optional(),
  /** Answers the plan (targets, policy, gates, waves) and stores nothing. */
  dryRun: z.boolean().optional(),
});
export type CreateRunBody = z.infer<typeof createRunBodySchema>;

export const idempotencyKeySchema = z
  .string()
  .regex(/^[A-Za-z0-9._:-]{1,128}$/, 'must be 1 to 128 letters, digits or . _ : -');

const ended = (status: RunStatus) => runStateMachine.isTerminal(status);

/** Loads a run the principal may see; another tenant's run does not exist for them. */
export async function visibleRun(runs: RunStore, principal: Principal, runId: string) {
  const record = await runs.load(runId);
  if (!record || record.run.tenantId !== principal.tenantId) throw new NotFoundError(`run '${runId}' not found`);
  return record;
}

/** The runbook a run executes, in its normal form. */
export async function runbookOf(
  runbooks: RunbookStore,
  run: Pick<Run, 'tenantId' | 'runbookId' | 'runbookVersion'>,
): Promise<Runbook> {
  const version = await runbooks.get(run.tenantId, run.runbookId, run.runbookVersion);
  if (!version) throw new NotFoundError(`runbook '${run.runbookId}' version ${run.runbookVersion} not found`);
  return parseRunbookObject(version.definition);
}

/**
 * Creates a run.
 * Input: the body, the caller, and an optional Idempotency-Key.
 * Output: the run id and status; the same key and body return the same run, the same key with
 * another body is a 409.
 * Steps: validate the body and inputs against the runbook version, store the run with
 * `run.created` and the key in one transaction, then start its interpreter execution.
 */
export function makeCreateRun(deps: Omit<RunDeps, 'callbacks'>) {
  return async function createRun(input: {
    principal: Principal;
    body: CreateRunBody;
    idempotencyKey?: string;
    /** What started the run when it is not an API call (a ticket event). */
    trigger?: Trigger;
    /** The run this one replays (`POST /v1/runs/{id}/replay`). */
    replayOf?: string;
    /** When the ticket has an active run: refuse (409, the default) or queue behind it. */
    onActive?: 'refuse' | 'queue';
  }): Promise<{ runId: string; status: RunStatus; created: boolean }> {
    const { principal, body } = input;
    if (input.idempotencyKey !== undefined) {
      const parsed = idempotencyKeySchema.safeParse(input.idempotencyKey);
      if (!parsed.success)
        throw new ValidationError('the Idempotency-Key header is not valid', [
          { path: 'headers.Idempotency-Key', message: parsed.error.issues[0]?.message ?? 'invalid' },
        ]);
    }
    const version = await versionOf(deps.runbooks, principal.tenantId, body);
    const runbook = parseRunbookObject(version.definition);
    const inputs = resolveInputs(runbook, body.inputs);
    if (body.dependsOn?.length) await deps.admission?.checkDependencies(principal.tenantId, body.dependsOn);
    const now = deps.clock.now().toISOString();
    let run: Run = {
      runId: `run-${randomUUID()}`,
      tenantId: principal.tenantId,
      runbookId: version.runbookId,
      runbookVersion: version.version,
      runbookDigest: version.digest,
      status: 'queued',
      inputs,
      ...(body.ticket && { ticket: body.ticket }),
      ...(input.trigger && { trigger: input.trigger }),
      priority: body.priority,
      ...(body.dependsOn?.length && { dependsOn: body.dependsOn }),
      ...(input.idempotencyKey && { idempotencyKey: input.idempotencyKey }),
      requestedBy: principal.subject,
      createdAt: now,
      updatedAt: now,
      cancelRequested: false,
      ...(input.replayOf !== undefined && { replayOf: input.replayOf }),
    };
    const requestHash = sha256Hex(canonicalJson(body as unknown as Json));
    const store = (run: Run) =>
      deps.runs.create(
        run,
        [
          {
            eventId: randomUUID(),
            type: 'run.created',
            timestamp: now,
            payload: {
              runbookId: run.runbookId,
              runbookVersion: run.runbookVersion,
              runbookDigest: run.runbookDigest,
              inputs,
              requestedBy: run.requestedBy,
              priority: run.priority,
              ...(run.ticket && { ticket: run.ticket }),
              ...(run.trigger && { trigger: run.trigger }),
              ...(run.replayOf !== undefined && { replayOf: run.replayOf }),
              ...(run.queuedBehind !== undefined && { queuedBehind: run.queuedBehind }),
            },
            meta: {},
          },
        ],
        input.idempotencyKey === undefined ? undefined : { key: input.idempotencyKey, requestHash },
      );
    // Admission's reads (the tenant's controls, the queue's backlog) go beside the create's transaction.
    const ahead = run.dependsOn ? undefined : deps.admission?.readAhead(run);
    let stored;
    try {
      stored = await store(run);
    } catch (error) {
      if (!(error instanceof TicketBusyError) || input.onActive !== 'queue' || !run.ticket) throw error;
      // Behind the last run in the ticket's line, so queued runs start one after another.
      const page = await deps.runs.listByTicket(run.tenantId, run.ticket.id, { limit: 50 });
      run = { ...run, queuedBehind: lastInLine(page.items, error.activeRunId) };
      stored = await store(run);
    }
    if (!stored.created) {
      if (stored.requestHash !== requestHash)
        throw new ConflictError(`Idempotency-Key '${input.idempotencyKey}' was used with a different request`);
      const existing = await visibleRun(deps.runs, principal, stored.runId);
      // The first request may have stored the run and failed before starting it. Starting is
      // idempotent (the execution is named for the run); a run admission holds back stays held.
      if (existing.run.status === 'queued' && existing.run.admission) await deps.starter.start(existing.run);
      else if (existing.run.status === 'queued' && !existing.run.dependsOn?.length)
        await admitOrStart(deps, existing.run);
      return { runId: existing.run.runId, status: existing.run.status, created: false };
    }
    const admitted = await admitOrStart(deps, run, ahead, stored.record);
    const status = admitted === 'throttled' ? 'throttled' : admitted === 'failed' ? 'failed' : run.status;
    return { runId: run.runId, status, created: true };
  };
}

/** Admission decides whether a stored run starts now, waits `throttled`, or waits on its dependencies. */
async function admitOrStart(
  deps: Omit<RunDeps, 'callbacks'>,
  run: Run,
  ahead?: AdmissionReadAhead,
  stored?: RunRecord,
) {
  if (deps.admission) return deps.admission.afterCreate(run, ahead, stored);
  // The execution is named for the run, so its ARN is derived when needed rather than stored; the
  // run as just stored goes with it, so the first Plan need not read it.
  await deps.starter.start(run, stored && carriedOf(deps.runs, stored));
  return 'started';
}

export const listRunsQuerySchema = z.strictObject({
  status: z.enum(RUN_STATUSES).optional(),
  /** A ticket's runs only (within the caller's tenant). */
  ticket: z.string().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(25),
  cursor: z.string().optional(),
});

export function makeListRuns(deps: Pick<RunDeps, 'runs'>) {
  return async (principal: Principal, query: z.infer<typeof listRunsQuerySchema>): Promise<Page<Run>> => {
    if (query.ticket === undefined) return deps.runs.list(principal.tenantId, query);
    // A ticket has few runs: its page is filtered by status here rather than by an index.
    const page = await deps.runs.listByTicket(principal.tenantId, query.ticket, query);
    return query.status ? { ...page, items: page.items.filter((run) => run.status === query.status) } : page;
  };
}

export type { StepView } from './run-reasons.js';
import { versionOf } from './runbook-versions.js';

export function makeGetRun(deps: Pick<RunDeps, 'runs' | 'runbooks'> & { approvals: Pick<ApprovalStore, 'list'> }) {
  return async (principal: Principal, runId: string) => {
    const record = await visibleRun(deps.runs, principal, runId);
    const [runbook, executions, approvals, aggregates] = await Promise.all([
      runbookOf(deps.runbooks, record.run),
      deps.runs.executions(runId),
      deps.approvals.list(runId),
      deps.runs.aggregates(runId),
    ]);
    const steps = stepViews(runbook, record.run, executions, aggregates);
    const error = runErrorView(record.run, steps);
    const waitsOnRuns = record.run.status === 'queued' && !record.run.admission ? (record.run.dependsOn ?? []) : [];
    const dependencies = new Map(
      await Promise.all(
        waitsOnRuns.map(async (id) => [id, (await deps.runs.load(id))?.run.status ?? 'unknown'] as const),
      ),
    );
    const waitingFor = waitingForView(record.run, approvals, dependencies);
    return {
      ...record.run,
      ...(error && { error }),
      ...(waitingFor && { waitingFor }),
      lastEventSeq: record.head.seq,
      steps,
      // Every gate, every round, with its decisions.
      approvals,
      attempts: executions
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
        .map((e) => ({
          executionId: e.executionId,
          stepId: e.stepId,
          kind: e.kind,
          targetId: e.targetId,
          attempt: e.attempt,
          status: e.status,
          ...(e.startedAt && { startedAt: e.startedAt }),
          ...(e.endedAt && { endedAt: e.endedAt }),
          ...(e.error && { error: e.error }),
        })),
    };
  };
}

export const eventsQuerySchema = z.strictObject({
  since: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

export function makeGetEvents(deps: Pick<RunDeps, 'runs'>) {
  return async (
    principal: Principal,
    runId: string,
    query: z.infer<typeof eventsQuerySchema>,
  ): Promise<{ events: RunEvent[]; nextSince?: number }> => {
    await visibleRun(deps.runs, principal, runId);
    const events = await deps.runs.events(runId, query.since, query.limit);
    const last = events.at(-1);
    return { events, ...(events.length === query.limit && last && { nextSince: last.seq }) };
  };
}

/**
 * Asks a run to stop: no further step is dispatched; running step executions finish or time out,
 * then the run ends `cancelled`. Cancelling twice is the same as once.
 */
export function makeCancelRun(deps: Pick<RunDeps, 'runs' | 'clock' | 'callbacks'>) {
  return async (principal: Principal, runId: string) => {
    const record = await visibleRun(deps.runs, principal, runId);
    if (ended(record.run.status)) throw new ConflictError(`run '${runId}' has already ended (${record.run.status})`);
    const now = deps.clock.now().toISOString();
    const result = await deps.runs.mutate(runId, (current) => {
      if (current.run.cancelRequested || ended(current.run.status)) return undefined;
      const change = cancelChange(principal.subject, now);
      // A run admission still holds has no interpreter to end it: it ends here, and the same
      // transaction gives back its place in the backlog and in its ticket's line.
      if (!heldByAdmission(current.run)) return change;
      return {
        ...change,
        run: { ...change.run, status: 'cancelled' as const, endedAt: now },
        events: [...change.events, draft('run.cancelled', now, { requestedBy: principal.subject })],
      };
    });
    // Nothing a worker has not taken yet will run; a Dispatch task left with nothing resumes.
    if (!ended((result?.record.run ?? record.run).status)) await endUnsent(deps, runId, () => CANCELLED_UNSENT);
    // A run waiting on a gate or an operator hears of it now, not at the wait's timeout.
    await wakeAll(deps, runId, { cancelRequested: true });
    return { runId, status: (result?.record.run ?? record.run).status, cancelRequested: true };
  };
}

/** Asks a run to roll back what it has done, newest first, and end `failed` (ROLLED_BACK). */
export function makeRollbackRun(deps: Pick<RunDeps, 'runs' | 'clock' | 'callbacks'>) {
  return async (principal: Principal, runId: string) => {
    const record = await visibleRun(deps.runs, principal, runId);
    if (ended(record.run.status))
      throw new ConflictError(`run '${runId}' has already ended (${record.run.status}); start a new run to undo it`);
    runStateMachine.transition(record.run.status, 'rolling_back');
    const now = deps.clock.now().toISOString();
    await deps.runs.mutate(runId, (current) =>
      current.rollbackRequested ? undefined : rollbackChange(current, principal.subject, now, 'requested'),
    );
    await wakeAll(deps, runId, { rollbackRequested: true });
    return { runId, status: record.run.status, rollbackRequested: true };
  };
}

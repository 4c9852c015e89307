import { randomUUID } from 'node:crypto';
import type { Json } from '../domain/canonical.js';
import type { Run } from '../domain/entities.js';
import { StaleWriteError, ValidationError } from '../domain/errors.js';
import { weightedRoundRobin } from '../domain/admission/fairness.js';
import { dependencyVerdict, findCycle } from '../domain/admission/dependencies.js';
import { triggerSource } from '../domain/admission/limits.js';
import {
  type AdmissionPlan,
  type Controls,
  type LimitName,
  planAdmission,
  refusedBy,
} from '../domain/admission/plan.js';

import type { BreakerSettings } from '../domain/admission/breaker.js';
import { type BreakerChanged, makeBreakers } from './breakers.js';
import { makeTicketQueue } from './ticket-queue.js';
import { breakerCell, bucketCell, controlLogEntry, readControls } from './admission-controls.js';

export type { BreakerChanged };
import {
  type AdmissionStore,
  type AdmissionWrite,
  BACKLOG,
  backlogCell,
  backlogMark,
  waiterCell,
} from './ports/admission.js';
import type { RunRecord, RunStore } from './ports/runs.js';
import { carriedOf } from './carried.js';
import type { Clock } from './ports.js';
import type { RunStarter } from './ports/interpreter.js';
import type { Backpressure, BackpressurePass } from './backpressure.js';

export interface AdmissionDeps {
  readonly runs: RunStore;
  readonly admission: AdmissionStore;
  readonly starter: RunStarter;
  readonly clock: Clock;
  /** Counts a refusal (`quota_exceeded_total`). */
  readonly refused?: (limit: LimitName, tenantId: string) => void;
  /** A breaker opened, half-opened or closed (`circuit_breaker_state`, incidents). */
  readonly breakerChanged?: (change: BreakerChanged) => Promise<void> | void;
  /** Threshold, window and cooldown of every breaker; seed 004's defaults when absent. */
  readonly breaker?: BreakerSettings;
  /** Holds new runs while their profile's queue is past its bound; no backpressure when absent. */
  readonly backpressure?: Backpressure;
}

/** What the end of a run says of it: enough for `onRunEnded`, which otherwise reads the run. */
export interface RunEnding {
  readonly status: Run['status'];
  readonly runbookId: string;
  readonly error?: { readonly code: string };
}

/** What admission did with a run. */
export type Admitted = 'started' | 'throttled' | 'waiting' | 'failed' | 'unchanged';

/**
 * What admission reads about a run while the run is still being stored: the tenant's controls and,
 * through the pass that will admit it, its profile queue's backlog.
 */
export interface AdmissionReadAhead {
  readonly controls: Promise<Controls>;
  readonly pass: BackpressurePass | undefined;
}

const asJson = (value: object) => JSON.parse(JSON.stringify(value)) as { [key: string]: Json };

/** The writes that take what a plan says a run takes. */
function takes(run: Run, plan: Extract<AdmissionPlan, { admit: true }>): AdmissionWrite[] {
  const tenantId = run.tenantId;
  return [
    ...plan.counters.map((c): AdmissionWrite => ({
      kind: 'takeCounter',
      tenantId,
      name: c.name,
      max: c.max,
      ...(c.expiresAt && { expiresAt: c.expiresAt }),
    })),
    ...plan.buckets.map((b): AdmissionWrite => ({
      kind: 'putCell',
      tenantId,
      name: bucketCell(b.name),
      value: { tokens: b.now.tokens, at: b.now.at },
      expect: { field: 'at', equals: b.was?.at },
    })),
    ...(plan.probe
      ? [
          {
            kind: 'putCell',
            tenantId,
            name: breakerCell(run.runbookId),
            value: asJson(plan.probe.next),
            expect: { field: 'updatedAt', equals: plan.probe.was.updatedAt },
          } satisfies AdmissionWrite,
        ]
      : []),
  ];
}

export function makeAdmission(deps: AdmissionDeps) {
  /** The tenant whose run a backlog pass admitted last; the next pass starts after it. */
  let servedLast: string | undefined;
  const tickets = makeTicketQueue(deps);
  const { tellBreaker, countOutcome, withdrawProbe } = makeBreakers({
    admission: deps.admission,
    clock: deps.clock,
    ...(deps.breaker && { settings: deps.breaker }),
    ...(deps.breakerChanged && { changed: deps.breakerChanged }),
  });

  /**
   * Starts the run's interpreter; the execution is named for the run, so its ARN is derived, not
   * stored. `stored` is the run as this admission just found or left it, carried to the first Plan.
   */
  async function start(run: Run, stored?: RunRecord): Promise<void> {
    await deps.starter.start(run, stored && carriedOf(deps.runs, stored));
  }

  /** Holds a fresh run back: `throttled`, with the limit and when it may try again, and a backlog place. */
  async function hold(run: Run, limit: LimitName, nextEligibleAt: string, source?: string): Promise<void> {
    deps.refused?.(limit, run.tenantId);
    const now = deps.clock.now().toISOString();
    // Noted before the backlog place is written, so a crash in between leaves the tenant noted;
    // noted again once it is written, with a fresh mark: a pass that read the first note and found
    // no place yet clears only that note, never the second.
    await noteBacklog(run.tenantId);
    const held = await deps.runs.mutate(run.runId, (record) =>
      record.run.status !== 'queued' || record.run.admission
        ? undefined
        : {
            run: { status: 'throttled', nextEligibleAt, heldBy: { limit, ...(source && { source }) }, updatedAt: now },
            events: [
              {
                eventId: randomUUID(),
                type: 'run.throttled',
                timestamp: now,
                payload: { limit, nextEligibleAt, ...(source && { source }) },
                meta: {},
              },
            ],
            writes: [
              {
                kind: 'putCell',
                tenantId: run.tenantId,
                name: backlogCell(record.run),
                value: { runId: run.runId, runbookId: run.runbookId, source: triggerSource(run.trigger) },
              },
            ],
          },
    );
    // The run is held whether or not this note lands; a lost one is the reconciler's to renew.
    if (held) await noteBacklog(run.tenantId).catch(() => undefined);
  }

  /**
   * Admits a run that is fresh (`queued`, never admitted) or `throttled`: takes its counters with
   * conditions in the same transaction as its status change and `run.admitted`, then starts it.
   * A refused condition leaves a fresh run `throttled`, and a throttled one where it is.
   */
  async function admit(
    run: Run,
    attempt = 0,
    pass: BackpressurePass | undefined = deps.backpressure?.pass(),
    ahead?: Promise<Controls>,
    stored?: RunRecord,
  ): Promise<{ outcome: Admitted; limit?: LimitName; source?: string }> {
    const now = deps.clock.now();
    // The tenant's controls and the profile queue's backlog are read side by side.
    const [controls, backlog] = await Promise.all([
      ahead ?? readControls(deps.admission, run.tenantId),
      pass?.backlogOf(run),
    ]);
    const plan = planAdmission(
      {
        runId: run.runId,
        runbookId: run.runbookId,
        priority: run.priority,
        source: triggerSource(run.trigger),
        ...(backlog && { backlog }),
      },
      controls,
      now,
    );
    if (!plan.admit) {
      if (run.status === 'queued') await hold(run, plan.limit, plan.nextEligibleAt, plan.source);
      return { outcome: run.status === 'queued' ? 'throttled' : 'unchanged', limit: plan.limit, source: plan.source };
    }
    const writes = takes(run, plan);
    // Nothing to count and nothing held back: the run starts as it is, without a write.
    if (writes.length === 0 && run.status === 'queued') {
      await start(run, stored);
      if (backlog) pass?.admitted(backlog.profile);
      return { outcome: 'started' };
    }
    const iso = now.toISOString();
    const held = plan.counters.filter((c) => c.held).map((c) => c.name);
    try {
      const committed = await deps.runs.mutate(run.runId, (record) => {
        const fresh = record.run.status === 'queued' && !record.run.admission;
        if (!fresh && record.run.status !== 'throttled') return undefined;
        return {
          run: {
            status: 'queued',
            admission: { at: iso, held },
            nextEligibleAt: undefined,
            heldBy: undefined,
            updatedAt: iso,
          },
          events: [
            {
              eventId: randomUUID(),
              type: 'run.admitted',
              timestamp: iso,
              payload: { waitedMs: now.getTime() - Date.parse(record.run.createdAt), held },
              meta: {},
            },
          ],
          writes: [
            ...writes,
            ...(plan.probe
              ? [
                  controlLogEntry(run.tenantId, iso, 'breaker.half_opened', 'capstan', {
                    runbookId: run.runbookId,
                    runId: run.runId,
                  }),
                ]
              : []),
            ...(record.run.status === 'throttled'
              ? [
                  {
                    kind: 'deleteCell',
                    tenantId: run.tenantId,
                    name: backlogCell(record.run),
                    mustExist: true,
                  } satisfies AdmissionWrite,
                ]
              : []),
          ],
        };
      });
      if (!committed) return { outcome: 'unchanged' };
      if (plan.probe) await tellBreaker(run.tenantId, run.runbookId, 'half_open', run.runId);
      await start(committed.record.run, committed.record);
      if (backlog) pass?.admitted(backlog.profile);
      return { outcome: 'started' };
    } catch (error) {
      if (!(error instanceof StaleWriteError)) throw error;
      const refusal = await whichRefused(run, plan, now);
      // Another admission took the bucket's token as read: decide again on what it left.
      if (refusal.limit === 'burst' && attempt < 10) return admit(run, attempt + 1, pass);
      if (run.status === 'queued') await hold(run, refusal.limit, refusal.nextEligibleAt, refusal.source);
      else deps.refused?.(refusal.limit, run.tenantId);
      return { outcome: run.status === 'queued' ? 'throttled' : 'unchanged', ...refusal };
    }
  }

  /** Which counter refused: the first found full; a token or probe raced away otherwise. */
  async function whichRefused(run: Run, plan: Extract<AdmissionPlan, { admit: true }>, now: Date) {
    const cells = await deps.admission.cells(run.tenantId, '');
    const value = new Map(cells.map((c) => [c.name, c.n ?? 0]));
    const full = plan.counters.find((c) => (value.get(c.name) ?? 0) >= c.max);
    if (full) return { ...refusedBy(full, now), source: full.name.split('#')[1] };
    const recheck = new Date(now.getTime() + 1_000).toISOString();
    return {
      limit: plan.probe ? ('breaker' as const) : ('burst' as const),
      nextEligibleAt: recheck,
      source: plan.probe ? run.runbookId : undefined,
    };
  }

  /**
   * Starts reading what admits a run about to be stored, so the reads and the create's transaction
   * go side by side: the tenant's controls and the run's profile queue backlog. The counters that
   * enforce a limit are taken with conditions when the run is admitted, so a read one write older
   * decides nothing they would not; a pause that lands in between is the same race as one landing
   * just after the read, and a queue's depth is approximate and lags what was just admitted anyway.
   */
  function readAhead(run: Run): AdmissionReadAhead {
    const controls = readControls(deps.admission, run.tenantId);
    const pass = deps.backpressure?.pass();
    // A create that fails first never awaits them; an error is the admission's to report.
    controls.catch(() => undefined);
    pass?.backlogOf(run).catch(() => undefined);
    return { controls, pass };
  }

  /**
   * After a run is stored: a run queued behind its ticket's active run, or with dependencies,
   * waits for them (or fails at once when a dependency failed); any other is admitted or held.
   */
  async function afterCreate(run: Run, ahead?: AdmissionReadAhead, stored?: RunRecord): Promise<Admitted> {
    const dependsOn = run.dependsOn ?? [];
    if (run.queuedBehind === undefined && dependsOn.length === 0)
      return (await admit(run, 0, ahead?.pass, ahead?.controls, stored)).outcome;
    if (run.queuedBehind !== undefined) await tickets.waitBehind(run, run.queuedBehind);
    if (dependsOn.length > 0)
      await deps.admission.commit(
        dependsOn.map((d) => ({
          kind: 'putCell',
          tenantId: run.tenantId,
          name: waiterCell(d, run.runId),
          value: { runId: run.runId },
        })),
      );
    return settleDependencies(run.runId);
  }

  /**
   * Looks at a waiting run: one queued behind its ticket's active run takes the ticket once that
   * run ended; then its dependencies admit it, fail it, or leave it waiting.
   */
  async function settleDependencies(runId: string): Promise<Admitted> {
    const record = await deps.runs.load(runId);
    if (!record || record.run.status !== 'queued' || record.run.admission) return 'unchanged';
    if ((await tickets.takeTicket(record.run)) === 'waiting') return 'waiting';
    const run = record.run.queuedBehind === undefined ? record.run : ((await deps.runs.load(runId))?.run ?? record.run);
    const statuses = new Map<string, string>();
    for (const id of run.dependsOn ?? []) statuses.set(id, (await deps.runs.load(id))?.run.status ?? 'failed');
    const verdict = dependencyVerdict(statuses);
    if (verdict.kind === 'wait') return 'waiting';
    const clear = (run.dependsOn ?? []).map((d): AdmissionWrite => ({
      kind: 'deleteCell',
      tenantId: run.tenantId,
      name: waiterCell(d, runId),
      mustExist: false,
    }));
    if (verdict.kind === 'ready') {
      await deps.admission.commit(clear);
      return (await admit(run)).outcome;
    }
    const now = deps.clock.now().toISOString();
    const error = {
      code: 'DEPENDENCY_FAILED',
      message: `dependency ${verdict.failed} ended ${verdict.status}`,
    };
    await deps.runs.mutate(runId, (current) =>
      current.run.status !== 'queued' || current.run.admission
        ? undefined
        : {
            run: { status: 'failed', error, endedAt: now, updatedAt: now },
            events: [
              {
                eventId: randomUUID(),
                type: 'run.failed',
                timestamp: now,
                payload: { error, dependency: verdict.failed },
                meta: {},
              },
            ],
            writes: clear,
          },
    );
    return 'failed';
  }

  /**
   * Admits throttled runs, tenant by tenant in weighted round-robin, each tenant's backlog in
   * priority then age order. A refusal on a scope skips that scope's other runs in this pass.
   */
  async function admitBacklog(only?: string, weightOf?: (tenantId: string) => number): Promise<number> {
    const noted = await deps.admission.backlogTenants();
    const tenants = only === undefined ? noted : noted.filter((t) => t.tenantId === only);
    const backlogs = new Map<string, Array<{ tenantId: string; runId: string; runbookId: string; source: string }>>();
    for (const { tenantId, mark } of tenants) {
      const cells = await deps.admission.cells(tenantId, BACKLOG, 200);
      if (cells.length === 0) await deps.admission.clearBacklog(tenantId, mark);
      else
        backlogs.set(
          tenantId,
          cells.map((c) => ({
            tenantId,
            runId: String(c.value.runId),
            runbookId: String(c.value.runbookId),
            source: String(c.value.source),
          })),
        );
    }
    const blocked = new Set<string>();
    const pass = deps.backpressure?.pass();
    let admitted = 0;
    for (const entry of weightedRoundRobin(backlogs, weightOf, servedLast)) {
      const scopes = [
        `${entry.tenantId}|*`,
        `${entry.tenantId}|${entry.runbookId}`,
        `${entry.tenantId}|${entry.source}`,
      ];
      if (scopes.some((s) => blocked.has(s))) continue;
      const record = await deps.runs.load(entry.runId);
      if (!record || record.run.status !== 'throttled') continue;
      if (await pass?.saturated(record.run)) continue;
      const result = await admit(record.run, 0, pass);
      if (result.outcome === 'started') {
        admitted++;
        servedLast = entry.tenantId;
      }
      // A full queue is every tenant's: the pass skips that profile's runs, not the tenant's.
      else if (result.limit !== undefined && result.limit !== 'backlog')
        blocked.add(`${entry.tenantId}|${result.source ?? '*'}`);
    }
    return admitted;
  }

  /**
   * A run ended: its breaker counts it, its dependents may go, and its freed capacity goes to the
   * backlog: its tenant's alone for a quota, but every tenant's in turn under backpressure, where
   * the queue it leaves room in is shared (else a flooding tenant would refill it at each end).
   */
  async function onRunEnded(runId: string, tenantId: string, known?: RunEnding): Promise<void> {
    const ended = known ? { run: known } : await deps.runs.load(runId);
    // Each part goes on when another fails: a breaker write that lost its race must not leave the
    // runs waiting on this one waiting. The first failure is reported at the end.
    const failures: unknown[] = [];
    const attempt = async (part: () => Promise<unknown>) => {
      try {
        await part();
      } catch (error) {
        failures.push(error);
      }
    };
    if (ended?.run.status === 'cancelled') await attempt(() => withdrawProbe(ended.run.runbookId, tenantId, runId));
    else if (ended && ended.run.error?.code !== 'DEPENDENCY_FAILED')
      await attempt(() => countOutcome(ended.run.runbookId, tenantId, ended.run.status === 'succeeded', runId));
    const waiters = await deps.admission.cells(tenantId, waiterCell(runId, ''));
    for (const waiter of waiters) await attempt(() => settleDependencies(String(waiter.value.runId)));
    if (!deps.backpressure) await attempt(() => admitBacklog(tenantId));
    else {
      // The ended run's tenant was served: the room goes to the next tenant first.
      servedLast = tenantId;
      await attempt(() => admitBacklog());
    }
    if (failures.length > 0) throw failures[0];
  }

  /**
   * Checks a new run's `dependsOn`: every id a run of the same tenant, and no cycle through them.
   * Throws `ValidationError` (400) otherwise.
   */
  async function checkDependencies(tenantId: string, dependsOn: readonly string[]): Promise<void> {
    const graph = new Map<string, readonly string[]>([['(new run)', dependsOn]]);
    for (const id of dependsOn) {
      const record = await deps.runs.load(id);
      if (!record || record.run.tenantId !== tenantId)
        throw new ValidationError(`dependsOn names an unknown run '${id}'`, [
          { path: 'dependsOn', message: `unknown run '${id}'` },
        ]);
      graph.set(id, record.run.dependsOn ?? []);
    }
    const cycle = findCycle(graph);
    if (cycle)
      throw new ValidationError(`dependsOn makes a cycle: ${cycle.join(' -> ')}`, [
        { path: 'dependsOn', message: 'cycle' },
      ]);
  }

  /** Notes that a tenant has backlog, so the admitter's next pass visits it. */
  async function noteBacklog(tenantId: string): Promise<void> {
    await deps.admission.markBacklog(tenantId, backlogMark(deps.clock.now().toISOString()));
  }

  return {
    admit,
    readAhead,
    afterCreate,
    admitBacklog,
    onRunEnded,
    settleDependencies,
    checkDependencies,
    noteBacklog,
  };
}
export type Admission = ReturnType<typeof makeAdmission>;

import { beforeEach } from 'vitest';
import { makeDispatch } from '../../../shared/app/dispatch.js';
import { makeStepResults } from '../../../shared/app/step-results.js';
import { makePlan, makePlanNext } from '../../../shared/app/plan.js';
import {
  type FakeClock,
  makeFakeClock,
  makeInMemoryRunbooks,
  makeRecordingCallbacks,
  makeRecordingQueue,
  type RecordingCallbacks,
  type RecordingQueue,
} from '../../../shared/app/ports/in-memory/fakes.js';
import { makeInMemoryInventoryStore } from '../../../shared/app/ports/in-memory/inventory.js';
import { makeInMemoryStores } from '../../../shared/app/ports/in-memory/runs.js';
import type { ApprovalStore } from '../../../shared/app/ports/approvals.js';
import type { InventoryStore } from '../../../shared/app/ports/inventory.js';
import type { RunbookStore } from '../../../shared/app/ports.js';
import type { CarriedRun, RunStore } from '../../../shared/app/ports/runs.js';
import { makeRegisterRunbook } from '../../../shared/app/runbooks.js';
import { createRunBodySchema, makeCreateRun } from '../../../shared/app/runs.js';
import type { Principal } from '../../../shared/domain/entities.js';
import type { StepCommand } from '../../../shared/domain/messages.js';
import type { PlanDecision } from '../../../shared/domain/planner.js';
import { DEFAULT_POLICY, type PolicyDocument } from '../../../shared/domain/policy.js';

/**
 * The in-memory world the interpreter's use cases run in (Plan, Dispatch, step results, approval
 * decisions, fan-out): a test file that imports this module gets a fresh one before each of its
 * tests, through the live bindings below.
 */
export let clock: FakeClock;
export let runs: RunStore;
export let approvals: ApprovalStore;
export let runbooks: RunbookStore;
export let queue: RecordingQueue;
export let callbacks: RecordingCallbacks;
export let inventory: InventoryStore;
/** Requests made of the run store, by kind (`get`, `query`, `update`, `transact`). */
export let requests: Map<string, number>;
/** What each run's interpreter was started with: the run its creation carried, as the state holds it. */
export let startedWith: Map<string, CarriedRun | undefined>;

beforeEach(() => {
  clock = makeFakeClock();
  ({ runs, approvals, requests } = makeInMemoryStores());
  startedWith = new Map();
  runbooks = makeInMemoryRunbooks();
  queue = makeRecordingQueue();
  callbacks = makeRecordingCallbacks();
  inventory = makeInMemoryInventoryStore({ clock, heartbeatMs: 5000 });
});

export const olive: Principal = { subject: 'olive', tenantId: 'acme', roles: ['operator', 'approver'] };
export const ann: Principal = { subject: 'ann', tenantId: 'acme', roles: ['approver'] };
export const bob: Principal = { subject: 'bob', tenantId: 'acme', roles: ['approver'] };

/** Registers the runbook `doc` (a dev-flex runbook named `unit` unless it says otherwise) and creates a run of it. */
export async function startRunbook(doc: Record<string, unknown>): Promise<string> {
  const source = { name: 'unit', environment: 'dev', sandbox_profile: 'dev-flex', ...doc };
  await makeRegisterRunbook({ runbooks, clock })({ principal: olive, format: 'json', source: JSON.stringify(source) });
  const starter = {
    start: async (run: { runId: string }, carried?: CarriedRun) => {
      startedWith.set(run.runId, carried && (JSON.parse(JSON.stringify(carried)) as CarriedRun));
      return `arn:${run.runId}`;
    },
  };
  const create = makeCreateRun({ runbooks, runs, clock, starter });
  const { runId } = await create({ principal: olive, body: createRunBodySchema.parse({ runbookId: source.name }) });
  return runId;
}

/** A run of a runbook made of `steps`. */
export const startRun = (steps: ReadonlyArray<Record<string, unknown>>, environment = 'dev') =>
  startRunbook({ steps, environment });

export const echo = (id: string, more: Record<string, unknown> = {}) => ({
  id,
  backend: 'test',
  action: 'echo',
  params: { message: id },
  ...more,
});

/** Plan and Dispatch over this world. */
export function interpreter(policy: PolicyDocument | Error = DEFAULT_POLICY) {
  const planNext = makePlanNext({ runbooks, runs, approvals, clock, callbacks, policy });
  const plan = makePlan({ runbooks, runs, approvals, clock, callbacks, policy });
  const dispatch = makeDispatch({ inventory, runbooks, runs, approvals, clock, callbacks, queue });
  return { planNext, plan, dispatch };
}

export function dispatchOf(decision: PlanDecision): Extract<PlanDecision, { action: 'dispatch' }> {
  if (decision.action !== 'dispatch') throw new Error(`expected a dispatch, got ${decision.action}`);
  return decision;
}

/** The types of a run's events, in order. */
export const types = async (runId: string) => (await runs.events(runId, 0, 1000)).map((e) => e.type);

/** A worker takes the lease of `command`, starts it and reports it succeeded. */
export async function succeedStep(command: StepCommand): Promise<void> {
  const results = makeStepResults({ runs, callbacks, clock });
  await results.holdingLeases(runs).acquireLease(command.runId, command.executionId, 'w', clock.now(), 30_000);
  await results.started(command, 'w');
  await results.finished(command, 'w', { outcome: 'succeeded', output: {} });
}

import { describe, expect, it } from 'vitest';
import { carriedFor, planResult, waitingTaskInputSchema } from '../../../functions/workflow/task-input.js';

const run = {
  runId: 'run-1',
  tenantId: 'acme',
  runbookId: 'rb',
  runbookVersion: 1,
  runbookDigest: 'digest',
  status: 'queued',
  inputs: {},
  priority: 'normal',
  requestedBy: 'olive',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  cancelRequested: false,
} as const;
const carried = { record: { run, head: { seq: 1, hash: 'a'.repeat(64) }, rollbackRequested: false }, revision: 0 };
const decision = {
  action: 'dispatch',
  stepId: 'one',
  kind: 'step',
  attempt: 1,
  policy: { outcome: 'allow', rule: 'r', reason: 'r' },
};

/** Dispatch's input as the state machine builds it, with Plan's whole result. */
const input = (plan: unknown, more: Record<string, unknown> = {}) =>
  waitingTaskInputSchema.parse({ runId: 'run-1', tenantId: 'acme', decision, taskToken: 't', plan, ...more });

describe("the interpreter's task input and Plan's result", () => {
  it('hands Dispatch the run Plan carried, when it is this run in this tenant', () => {
    expect(carriedFor(input({ decision, carried }))).toEqual(carried);
  });

  it('drops anything else, so Dispatch reads the run: nothing, null, another run or tenant, a malformed record', () => {
    expect(carriedFor(input(undefined))).toBeUndefined();
    expect(carriedFor(input({ decision }))).toBeUndefined();
    expect(carriedFor(input({ decision, carried: null }))).toBeUndefined();
    expect(carriedFor(input({ decision, carried }, { runId: 'run-2' }))).toBeUndefined();
    expect(carriedFor(input({ decision, carried }, { tenantId: 'other' }))).toBeUndefined();
    const extra = { ...carried, record: { ...carried.record, run: { ...run, smuggled: true } } };
    expect(carriedFor(input({ decision, carried: extra }))).toBeUndefined();
    expect(carriedFor(input({ decision, carried: { record: {}, revision: 'x' } }))).toBeUndefined();
  });

  it('answers a definition that asks with { decision, carried } (null when nothing is carried), an earlier one with the decision', () => {
    const planned = { decision: decision as never, carried: carried as never };
    expect(planResult(planned, true)).toEqual({ decision, carried });
    expect(planResult({ decision: decision as never }, true)).toEqual({ decision, carried: null });
    expect(planResult(planned, false)).toEqual(decision);
  });
});

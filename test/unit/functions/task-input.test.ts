import { describe, expect, it } from 'vitest';
import { carriedRunOf, dispatchInputOf, planResult } from '../../../functions/workflow/task-input.js';
import type { Planned } from '../../../shared/app/plan.js';
import { aRun } from '../../support/runs.js';

const run = aRun();
const carried = { record: { run, head: { seq: 1, hash: 'a'.repeat(64) }, rollbackRequested: false }, revision: 0 };
const decision = {
  action: 'dispatch',
  stepId: 'one',
  kind: 'step',
  attempt: 1,
  policy: { outcome: 'allow', rule: 'r', reason: 'r' },
} as const;

/** Dispatch's input as the state machine builds it: Plan's result as the decision. */
const input = (planned: unknown, more: Record<string, unknown> = {}) => ({
  runId: 'run-1',
  tenantId: 'acme',
  decision: planned,
  taskToken: 't',
  ...more,
});

describe("Plan's result and Dispatch's input", () => {
  it('carries the run beside the decision, and Dispatch takes it apart again', () => {
    const result = planResult({ decision, carried } as unknown as Planned);
    expect(result).toEqual({ ...decision, carried });
    // What the state machine keeps is plain JSON.
    const { input: parsed, carried: taken, dropped } = dispatchInputOf(JSON.parse(JSON.stringify(input(result))));
    expect(parsed.decision).toEqual(decision);
    expect(taken).toEqual(carried);
    expect(dropped).toBe(false);
  });

  it('is the decision alone when nothing is carried, as a Plan of an earlier version answers', () => {
    expect(planResult({ decision } as unknown as Planned)).toEqual(decision);
    expect(dispatchInputOf(input(decision))).toEqual({
      input: input(decision),
      carried: undefined,
      dropped: false,
    });
  });

  it('drops a carried run of another run or tenant, or one that does not parse, and says so', () => {
    const dropped = (more: Record<string, unknown>, offered: unknown = carried) =>
      dispatchInputOf(input({ ...decision, carried: offered }, more));
    for (const case_ of [
      dropped({ runId: 'run-2' }),
      dropped({ tenantId: 'other' }),
      dropped({}, { ...carried, record: { ...carried.record, run: { ...run, smuggled: true } } }),
      dropped({}, { record: {}, revision: 'x' }),
    ]) {
      expect(case_.carried).toBeUndefined();
      expect(case_.dropped).toBe(true);
      expect(case_.input.decision).toEqual(decision);
    }
  });

  it('still refuses a decision with fields it does not know', () => {
    expect(() => dispatchInputOf(input({ ...decision, extra: 1 }))).toThrow();
  });
});

describe('the run an execution carries to its first Plan', () => {
  it('is taken when it is this run in this tenant, as plain JSON', () => {
    expect(carriedRunOf(JSON.parse(JSON.stringify(carried)), run.runId, run.tenantId)).toEqual({
      carried,
      dropped: false,
    });
  });

  it('is nothing, and no drop, when the state holds none (a later Plan, or a restarted execution)', () => {
    expect(carriedRunOf(null, run.runId, run.tenantId)).toEqual({ carried: undefined, dropped: false });
    expect(carriedRunOf(undefined, run.runId, run.tenantId)).toEqual({ carried: undefined, dropped: false });
  });

  it("is dropped, and says so, when it is another run's, another tenant's, or does not parse", () => {
    for (const [offered, runId, tenantId] of [
      [carried, 'run-2', run.tenantId],
      [carried, run.runId, 'other'],
      [{ record: {}, revision: 0 }, run.runId, run.tenantId],
    ] as const)
      expect(carriedRunOf(offered, runId, tenantId)).toEqual({ carried: undefined, dropped: true });
  });
});

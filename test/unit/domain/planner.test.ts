import { describe, expect, it } from 'vitest';
import type { StepExecution } from '../../../shared/domain/entities.js';
import { plan, type PlanInput } from '../../../shared/domain/planner.js';
import { retryDelayMs } from '../../../shared/domain/step-state.js';
import { DEFAULT_POLICY } from '../../../shared/domain/policy.js';
import { parseRunbookObject } from '../../../shared/domain/runbook.js';

const now = new Date('2026-01-01T00:10:00Z');
const earlier = '2026-01-01T00:00:00Z';

function runbook(steps: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}) {
  return parseRunbookObject({
    name: 'r',
    environment: 'dev',
    sandbox_profile: 'dev-flex',
    steps: steps.map((s) => ({ backend: 'test', action: 'echo', params: { message: 'x' }, ...s })),
    ...extra,
  });
}

type Exec = PlanInput['executions'][number];
const exec = (stepId: string, status: StepExecution['status'], more: Partial<Exec> = {}): Exec => ({
  stepId,
  kind: 'step',
  attempt: 1,
  status,
  targetId: 'once',
  startedAt: status === 'pending' ? undefined : earlier,
  endedAt: status === 'pending' || status === 'running' ? undefined : earlier,
  ...more,
});

function decide(
  rb: ReturnType<typeof runbook>,
  executions: Exec[],
  run: Partial<PlanInput['run']> = {},
  at: Date = now,
) {
  return plan({
    runbook: rb,
    run: { runId: 'run-1', status: 'running', cancelRequested: false, createdAt: earlier, startedAt: earlier, ...run },
    executions,
    now: at,
  });
}

const three = runbook([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);

describe('plan', () => {
  it('dispatches the first step of a new run', () => {
    expect(decide(three, [])).toEqual({ action: 'dispatch', stepId: 'a', kind: 'step', attempt: 1 });
  });

  it('moves to the next step after a success and succeeds after the last', () => {
    expect(decide(three, [exec('a', 'succeeded')])).toMatchObject({ action: 'dispatch', stepId: 'b' });
    expect(
      decide(
        three,
        ['a', 'b', 'c'].map((id) => exec(id, 'succeeded')),
      ),
    ).toEqual({ action: 'succeed' });
  });

  it('re-attaches to a step that is still in flight (after a restart or a lost callback)', () => {
    expect(decide(three, [exec('a', 'succeeded'), exec('b', 'running', { attempt: 2 })])).toEqual({
      action: 'dispatch',
      stepId: 'b',
      kind: 'step',
      attempt: 2,
    });
  });

  it('waits with jittered exponential back-off, then dispatches the next attempt', () => {
    const rb = runbook([{ id: 'a', retries: 2 }]);
    const failed = exec('a', 'failed', { error: { code: 'E', message: 'boom', retryable: true } });
    const waiting = decide(rb, [failed], {}, new Date(Date.parse(earlier) + 10));
    expect(waiting).toMatchObject({ action: 'wait', stepId: 'a' });
    const delay = retryDelayMs('run-1', 'a', 1);
    expect(delay).toBeGreaterThanOrEqual(1000);
    expect(delay).toBeLessThanOrEqual(1000);
    expect(decide(rb, [failed])).toEqual({ action: 'dispatch', stepId: 'a', kind: 'step', attempt: 2 });
    // The ceiling doubles with each attempt and stays under the cap.
    expect(retryDelayMs('run-1', 'a', 3)).toBeLessThanOrEqual(4000);
    expect(retryDelayMs('run-1', 'a', 30)).toBeLessThanOrEqual(300_000);
  });

  it('does not retry a terminal error, nor beyond the retries allowed', () => {
    const rb = runbook([{ id: 'a', retries: 2 }]);
    const terminal = exec('a', 'failed', { error: { code: 'E', message: 'bad input', retryable: false } });
    expect(decide(rb, [terminal])).toMatchObject({ action: 'fail', error: { code: 'STEP_FAILED' } });
    const spent = [1, 2, 3].map((attempt) => exec('a', 'failed', { attempt }));
    expect(decide(rb, spent)).toMatchObject({ action: 'fail' });
  });

  it('rolls back the succeeded steps in reverse order after a fail-fast failure', () => {
    const rollback = { backend: 'test', action: 'echo', params: { message: 'undo' } };
    const rb = runbook([{ id: 'a', rollback }, { id: 'b' }, { id: 'c', rollback }, { id: 'd' }, { id: 'e', rollback }]);
    const base = [exec('a', 'succeeded'), exec('b', 'succeeded'), exec('c', 'succeeded'), exec('d', 'failed')];
    expect(decide(rb, base)).toEqual({ action: 'dispatch', stepId: 'c', kind: 'rollback', attempt: 1 });
    const afterC = [...base, exec('c', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, afterC)).toEqual({ action: 'dispatch', stepId: 'a', kind: 'rollback', attempt: 1 });
    const afterA = [...afterC, exec('a', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, afterA)).toEqual({
      action: 'fail',
      error: { code: 'STEP_FAILED', message: "step 'd' failed" },
      rolledBack: ['c', 'a'],
    });
  });

  const undo = { backend: 'test', action: 'echo', params: { message: 'undo' } };

  it("runs a failed step's own rollback first, then the earlier steps' rollbacks newest first", () => {
    const rb = runbook([
      { id: 'a', rollback: undo },
      { id: 'b', rollback: undo },
      { id: 'c', rollback: undo },
    ]);
    const failed = [exec('a', 'succeeded'), exec('b', 'succeeded'), exec('c', 'failed')];
    expect(decide(rb, failed)).toEqual({ action: 'dispatch', stepId: 'c', kind: 'rollback', attempt: 1 });
    const afterC = [...failed, exec('c', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, afterC)).toEqual({ action: 'dispatch', stepId: 'b', kind: 'rollback', attempt: 1 });
    const afterB = [...afterC, exec('b', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, afterB)).toEqual({ action: 'dispatch', stepId: 'a', kind: 'rollback', attempt: 1 });
    const afterA = [...afterB, exec('a', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, afterA)).toEqual({
      action: 'fail',
      error: { code: 'STEP_FAILED', message: "step 'c' failed" },
      rolledBack: ['c', 'b', 'a'],
    });
  });

  it("waits for a failed step's retries before running its rollback", () => {
    const rb = runbook([{ id: 'a', retries: 1, rollback: undo }]);
    const first = exec('a', 'failed', { error: { code: 'E', message: 'boom', retryable: true } });
    expect(decide(rb, [first])).toEqual({ action: 'dispatch', stepId: 'a', kind: 'step', attempt: 2 });
    expect(decide(rb, [first, exec('a', 'failed', { attempt: 2 })])).toMatchObject({ stepId: 'a', kind: 'rollback' });
  });

  it('does not roll back a step that never started (refused at dispatch)', () => {
    const rb = runbook([{ id: 'a', rollback: undo }]);
    const refused = exec('a', 'failed', { startedAt: undefined, error: { code: 'POLICY_DENIED', message: 'no' } });
    expect(decide(rb, [refused])).toMatchObject({ action: 'fail', rolledBack: [] });
  });

  it('keeps the original error when a rollback fails, and lists the rollback as run', () => {
    const rb = runbook([{ id: 'a', rollback: undo }]);
    const execs = [
      exec('a', 'failed', { error: { code: 'E', message: 'restart failed', retryable: false } }),
      exec('a', 'failed', { kind: 'rollback', error: { code: 'E', message: 'start failed', retryable: false } }),
    ];
    expect(decide(rb, execs)).toEqual({
      action: 'fail',
      error: { code: 'STEP_FAILED', message: "step 'a' failed: restart failed" },
      rolledBack: ['a'],
    });
  });

  it('under fail-fast, runs the always and on_failure steps after the rollbacks and skips on_success ones', () => {
    const rb = runbook([
      { id: 'a', rollback: undo },
      { id: 'b' },
      { id: 'verify' },
      { id: 'notify', condition: 'on_failure' },
      { id: 'announce', condition: 'always', rollback: undo },
    ]);
    const failed = [exec('a', 'succeeded'), exec('b', 'failed')];
    expect(decide(rb, failed)).toMatchObject({ action: 'dispatch', stepId: 'a', kind: 'rollback' });
    const rolled = [...failed, exec('a', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, rolled)).toEqual({ action: 'dispatch', stepId: 'notify', kind: 'step', attempt: 1 });
    const notified = [...rolled, exec('notify', 'succeeded')];
    expect(decide(rb, notified)).toEqual({ action: 'dispatch', stepId: 'announce', kind: 'step', attempt: 1 });
    // A step that ran after the failure is not rolled back.
    expect(decide(rb, [...notified, exec('announce', 'succeeded')])).toEqual({
      action: 'fail',
      error: { code: 'STEP_FAILED', message: "step 'b' failed" },
      rolledBack: ['a'],
    });
  });

  it("does not let an always step's own failure hide the original error", () => {
    const rb = runbook([{ id: 'a' }, { id: 'cleanup', condition: 'always' }]);
    const execs = [
      exec('a', 'failed', { error: { code: 'E', message: 'first', retryable: false } }),
      exec('cleanup', 'failed', { error: { code: 'E', message: 'second', retryable: false } }),
    ];
    expect(decide(rb, execs)).toEqual({
      action: 'fail',
      error: { code: 'STEP_FAILED', message: "step 'a' failed: first" },
      rolledBack: [],
    });
  });

  it('runs an always step after a success too, and on_failure steps only after a failure', () => {
    const rb = runbook([
      { id: 'a' },
      { id: 'notify', condition: 'on_failure' },
      { id: 'cleanup', condition: 'always' },
    ]);
    expect(decide(rb, [exec('a', 'succeeded')])).toMatchObject({ action: 'dispatch', stepId: 'cleanup' });
    expect(decide(rb, [exec('a', 'succeeded'), exec('cleanup', 'succeeded')])).toEqual({ action: 'succeed' });
  });

  it("under continue, runs a failed step's own rollback before the next step and leaves the others alone", () => {
    const rb = runbook(
      [
        { id: 'a', rollback: undo },
        { id: 'b', rollback: undo },
        { id: 'c', condition: 'always' },
      ],
      {
        strategy: 'continue',
      },
    );
    const failed = [exec('a', 'succeeded'), exec('b', 'failed')];
    expect(decide(rb, failed)).toEqual({ action: 'dispatch', stepId: 'b', kind: 'rollback', attempt: 1 });
    const rolled = [...failed, exec('b', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, rolled)).toEqual({ action: 'dispatch', stepId: 'c', kind: 'step', attempt: 1 });
    expect(decide(rb, [...rolled, exec('c', 'succeeded')])).toEqual({
      action: 'fail',
      error: { code: 'STEP_FAILED', message: "step 'b' failed" },
      rolledBack: ['b'],
    });
  });

  it("on request, rolls back a failed step's own rollback and the succeeded steps", () => {
    const rb = runbook([
      { id: 'a', rollback: undo },
      { id: 'b', rollback: undo },
    ]);
    const execs = [exec('a', 'succeeded'), exec('b', 'failed'), exec('b', 'succeeded', { kind: 'rollback' })];
    expect(decide(rb, execs, { rollbackRequested: true })).toMatchObject({ stepId: 'a', kind: 'rollback' });
  });

  it('under continue, runs always steps after a failure, on_failure only after one, and skips on_success', () => {
    const rb = runbook(
      [
        { id: 'a' },
        { id: 'b' },
        { id: 'cleanup', condition: 'always' },
        { id: 'notify', condition: 'on_failure' },
        { id: 'verify', condition: 'on_success' },
      ],
      { strategy: 'continue' },
    );
    const failed = [exec('a', 'succeeded'), exec('b', 'failed')];
    expect(decide(rb, failed)).toMatchObject({ action: 'dispatch', stepId: 'cleanup' });
    const afterCleanup = [...failed, exec('cleanup', 'succeeded')];
    expect(decide(rb, afterCleanup)).toMatchObject({ action: 'dispatch', stepId: 'notify' });
    expect(decide(rb, [...afterCleanup, exec('notify', 'succeeded')])).toMatchObject({
      action: 'fail',
      rolledBack: [],
    });
    // Without a failure, on_failure steps are skipped and the run succeeds.
    const clean = ['a', 'b', 'cleanup', 'verify'].map((id) => exec(id, 'succeeded'));
    expect(decide(rb, clean.slice(0, 3))).toMatchObject({ action: 'dispatch', stepId: 'verify' });
    expect(decide(rb, clean)).toEqual({ action: 'succeed' });
  });

  it('cancels only once nothing is in flight', () => {
    expect(decide(three, [exec('a', 'running')], { cancelRequested: true })).toMatchObject({ action: 'dispatch' });
    expect(decide(three, [exec('a', 'succeeded')], { cancelRequested: true })).toEqual({ action: 'cancelled' });
  });

  it('rolls back on request and fails with ROLLED_BACK', () => {
    const rb = runbook([
      { id: 'a', rollback: { backend: 'test', action: 'echo', params: { message: 'u' } } },
      { id: 'b' },
    ]);
    const done = [exec('a', 'succeeded')];
    expect(decide(rb, done, { rollbackRequested: true })).toMatchObject({ kind: 'rollback', stepId: 'a' });
    expect(decide(rb, [...done, exec('a', 'succeeded', { kind: 'rollback' })], { rollbackRequested: true })).toEqual({
      action: 'fail',
      error: { code: 'ROLLED_BACK', message: 'rolled back on request' },
      rolledBack: ['a'],
    });
  });

  it('fails a run past its timeout, after rolling back', () => {
    const rb = runbook([{ id: 'a' }, { id: 'b' }], { timeout: '5m' });
    expect(decide(rb, [exec('a', 'succeeded')])).toMatchObject({ action: 'fail', error: { code: 'RUN_TIMEOUT' } });
  });

  it('counts a target that failed among several as the step failing', () => {
    const execs = [exec('a', 'succeeded', { targetId: 'n1' }), exec('a', 'timed_out', { targetId: 'n2' })];
    expect(decide(three, execs)).toMatchObject({ action: 'fail' });
  });
});

describe('plan, a pipeline phase through the policy', () => {
  it('asks for the gate a later step of the phase needs before any target starts', () => {
    const rb = parseRunbookObject({
      name: 'r',
      environment: 'dev',
      sandbox_profile: 'dev-flex',
      phases: [
        {
          id: 'roll',
          mode: 'pipeline',
          steps: [
            { id: 'drain', backend: 'test', action: 'echo', params: { message: 'x' } },
            { id: 'wipe', backend: 'script', action: 'run', params: { script: 'echo-args' } },
          ],
        },
      ],
    });
    const decision = plan({
      runbook: rb,
      run: { runId: 'run-1', status: 'running', cancelRequested: false, createdAt: earlier, startedAt: earlier },
      executions: [],
      now,
      policy: DEFAULT_POLICY,
      approvals: [],
    });
    expect(decision).toMatchObject({
      action: 'await_approval',
      stepId: 'drain',
      scope: 'phase',
      scopeId: 'roll',
      requiredApprovals: 2,
      rule: 'two-key',
    });
  });
});

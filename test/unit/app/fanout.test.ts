import { verifyChain } from '../../../shared/domain/events.js';
import { beforeEach, describe, expect, it } from 'vitest';
import { makeDispatch } from '../../../shared/app/dispatch.js';
import { makeFanout } from '../../../shared/app/fanout.js';
import { makePlanNext } from '../../../shared/app/plan.js';
import { makeStepResults, type Outcome } from '../../../shared/app/step-results.js';
import type { RunStore } from '../../../shared/app/ports/runs.js';
import type { StepCommand } from '../../../shared/domain/messages.js';
import type { PlanDecision } from '../../../shared/domain/planner.js';
import { DEFAULT_POLICY } from '../../../shared/domain/policy.js';
import {
  approvals,
  callbacks,
  clock,
  inventory,
  queue,
  runbooks,
  runs,
  startRunbook,
  types,
} from './interpreter-world.js';

/** Five web nodes and a database in tenant `acme`, and a web node of another tenant. */
beforeEach(async () => {
  for (const id of ['web-1', 'web-2', 'web-3', 'web-4', 'web-5'])
    await inventory.declare(
      { id, tenantId: 'acme', groups: ['web'], attributes: { url: `http://${id}` } },
      clock.now(),
    );
  await inventory.declare({ id: 'db-1', tenantId: 'acme', groups: ['db'], attributes: {} }, clock.now());
  await inventory.declare({ id: 'web-9', tenantId: 'other', groups: ['web'], attributes: {} }, clock.now());
});

const startRun = (doc: Record<string, unknown>) => startRunbook({ name: 'fan', ...doc });

const echo = (id: string, more: Record<string, unknown> = {}) => ({
  id,
  backend: 'test',
  action: 'echo',
  params: { message: `${id} on {{ target.id }}` },
  target: { group: 'web' },
  ...more,
});

/**
 * Runs the interpreter and one worker that takes commands in the order they were sent, each to
 * its end before the next, answering with `outcome`. Records what was in flight at each moment.
 * Every use case works on `through` (the world's run store unless a test wraps it).
 */
async function drive(
  runId: string,
  outcome: (cmd: StepCommand) => Outcome = () => ({ outcome: 'succeeded' }),
  through: RunStore = runs,
) {
  const planNext = makePlanNext({ runbooks, runs: through, approvals, clock, callbacks, policy: DEFAULT_POLICY });
  const dispatch = makeDispatch({ inventory, runbooks, runs: through, approvals, clock, callbacks, queue });
  const fanout = makeFanout({ runs: through, runbooks, queue, callbacks, clock });
  const results = makeStepResults({ runs: through, callbacks, clock, fanout });
  const store = results.holdingLeases(through);
  const order: string[] = [];
  const inFlight = new Map<string, number>();
  let taken = 0;
  let decision: PlanDecision = await planNext(runId);
  for (let turn = 0; turn < 500; turn++) {
    if (decision.action === 'wait') clock.advance(decision.waitSeconds * 1000);
    else if (decision.action === 'dispatch') {
      const token = `token-${turn}`;
      await dispatch(runId, decision, token);
      while (!callbacks.succeeded.some((c) => c.taskToken === token)) {
        const next = queue.sent[taken++];
        if (!next) throw new Error(`nothing queued for ${decision.stepId} and its task is still waiting`);
        const { command } = next;
        const stepInFlight = queue.sent.filter((s) => s.command.stepId === command.stepId).length;
        inFlight.set(
          command.stepId,
          Math.max(inFlight.get(command.stepId) ?? 0, stepInFlight - countDone(command.stepId)),
        );
        order.push(`${command.stepId}@${command.targetId}`);
        await store.acquireLease(command.runId, command.executionId, 'worker-1', clock.now(), 30_000);
        await results.started(command, 'worker-1');
        await results.finished(command, 'worker-1', outcome(command));
        done.set(command.stepId, countDone(command.stepId) + 1);
      }
    } else return { decision, order, inFlight };
    decision = await planNext(runId);
  }
  throw new Error('the run did not end');
}

const done = new Map<string, number>();
const countDone = (stepId: string) => done.get(stepId) ?? 0;
beforeEach(() => done.clear());

async function detail(runId: string) {
  return {
    run: (await runs.load(runId))?.run,
    executions: await runs.executions(runId),
    events: await runs.events(runId, 0, 5000),
  };
}

describe('fan-out', () => {
  it('runs a step once on every node of the group, in its own tenant, with the node substituted', async () => {
    const runId = await startRun({ steps: [echo('hello')] });
    const { decision, order } = await drive(runId);
    expect(decision.action).toBe('succeed');
    expect(order).toEqual(['hello@web-1', 'hello@web-2', 'hello@web-3', 'hello@web-4', 'hello@web-5']);
    const sent = queue.sent.map((s) => s.command);
    expect(sent.map((c) => c.params.message)).toContain('hello on web-3');
    expect(
      sent.every((c) => c.target?.source === 'declared' && c.target.attributes.url === `http://${c.targetId}`),
    ).toBe(true);
    const dispatched = (await detail(runId)).events.find((e) => e.type === 'step.dispatched');
    expect(dispatched?.payload).toMatchObject({ expected: 5, targets: ['web-1', 'web-2', 'web-3', 'web-4', 'web-5'] });
    // Only a step of one execution carries the interpreter's token: a target's result never completes the unit alone.
    expect(sent.filter((c) => c.taskToken !== undefined)).toEqual([]);
  });

  it("stages every target's events in the run's inbox, off its head, and chains them before what follows the step", async () => {
    const runId = await startRun({
      steps: [echo('one'), { id: 'after', backend: 'test', action: 'echo', params: { message: 'x' } }],
    });
    const inner = runs;
    const onHead: string[] = [];
    const watched: RunStore = {
      ...inner,
      mutate: (id, decide, known) =>
        inner.mutate(
          id,
          (record) => {
            const change = decide(record);
            for (const e of change?.events ?? []) onHead.push(`${e.type}@${e.stepId ?? ''}`);
            return change;
          },
          known,
        ),
      append: (run, change, head) => {
        for (const e of change.events) onHead.push(`${e.type}@${e.stepId ?? ''}`);
        return inner.append(run, change, head);
      },
    };
    const { decision } = await drive(runId, undefined, watched);
    expect(decision.action).toBe('succeed');
    expect(onHead.filter((e) => e.endsWith('@one') && /step\.(started|succeeded)/.test(e))).toEqual([]);
    expect(onHead).toContain('step.started@after');
    const { events } = await detail(runId);
    expect(verifyChain(events).valid).toBe(true);
    const results = events.filter((e) => e.stepId === 'one' && e.type === 'step.succeeded' && e.targetId);
    expect(results).toHaveLength(5);
    const next = events.findIndex((e) => e.stepId === 'after' && e.type === 'step.dispatched');
    expect(Math.max(...results.map((e) => events.indexOf(e)))).toBeLessThan(next);
  });

  it('finishes a barrier step on every target before the next step starts', async () => {
    const runId = await startRun({ steps: [echo('one'), echo('two')] });
    const { order } = await drive(runId);
    const firstTwo = order.findIndex((o) => o.startsWith('two@'));
    expect(order.slice(0, firstTwo).every((o) => o.startsWith('one@'))).toBe(true);
    expect(order.filter((o) => o.startsWith('one@'))).toHaveLength(5);
    expect(order.filter((o) => o.startsWith('two@'))).toHaveLength(5);
  });

  it('never has more targets in flight than max_concurrency', async () => {
    const runId = await startRun({ steps: [echo('roll', { max_concurrency: 2 })] });
    const { inFlight, decision } = await drive(runId);
    expect(decision.action).toBe('succeed');
    expect(inFlight.get('roll')).toBe(2);
  });

  it('ramps exponentially: one target first, then two, then four', async () => {
    const runId = await startRun({ steps: [echo('ramp', { max_concurrency: 4, ramp: 'exponential' })] });
    const planNext = makePlanNext({ runbooks, runs, approvals, clock, callbacks, policy: DEFAULT_POLICY });
    const dispatch = makeDispatch({ inventory, runbooks, runs, approvals, clock, callbacks, queue });
    const decision = await planNext(runId);
    if (decision.action !== 'dispatch') throw new Error('expected a dispatch');
    await dispatch(runId, decision, 'token');
    expect(queue.sent).toHaveLength(1);
    const fanout = makeFanout({ runs, runbooks, queue, callbacks, clock });
    const results = makeStepResults({ runs, callbacks, clock, fanout });
    const finish = async (command: StepCommand) => {
      await results.holdingLeases(runs).acquireLease(runId, command.executionId, 'w', clock.now(), 30_000);
      await results.finished(command, 'w', { outcome: 'succeeded' });
    };
    await finish(queue.sent[0]!.command);
    expect(queue.sent).toHaveLength(3);
    // The wave of two ends before the wave of four starts.
    await finish(queue.sent[1]!.command);
    expect(queue.sent).toHaveLength(3);
    await finish(queue.sent[2]!.command);
    expect(queue.sent).toHaveLength(5);
  });

  it('stops new targets once more than max_errors failed, lets the rest finish, and fails the step', async () => {
    const runId = await startRun({ steps: [echo('risky', { max_concurrency: 1, max_errors: 1 })] });
    const broken = new Set(['web-1', 'web-2']);
    const { decision, order } = await drive(runId, (cmd) =>
      broken.has(cmd.targetId)
        ? { outcome: 'failed', error: { code: 'BOOM', message: `${cmd.targetId} broke`, retryable: false } }
        : { outcome: 'succeeded' },
    );
    expect(order).toEqual(['risky@web-1', 'risky@web-2']);
    expect(decision).toMatchObject({ action: 'fail', error: { code: 'STEP_FAILED' } });
    if (decision.action !== 'fail') return;
    expect(decision.error.message).toMatch(/2 of 5 target\(s\) failed, 3 not started \(max_errors 1\)/);
    const halted = (await detail(runId)).events.find((e) => e.type === 'step.halted');
    expect(halted?.payload).toMatchObject({ skipped: 3, failed: 2 });
  });

  it('tolerates failures within max_errors and succeeds the step', async () => {
    const runId = await startRun({ steps: [echo('lenient', { max_errors: '20%' })] });
    const { decision } = await drive(runId, (cmd) =>
      cmd.targetId === 'web-4'
        ? { outcome: 'failed', error: { code: 'BOOM', message: 'no', retryable: false } }
        : { outcome: 'succeeded' },
    );
    expect(decision.action).toBe('succeed');
  });

  it('fails a step whose group has no node, with the reason, or skips it when told to', async () => {
    const failing = await startRun({ steps: [echo('nowhere', { target: { group: 'missing' } })] });
    const failed = await drive(failing);
    expect(failed.decision).toMatchObject({ action: 'fail' });
    if (failed.decision.action === 'fail')
      expect(failed.decision.error.message).toMatch(/group missing resolved to no node/);
    const skipping = await startRun({
      steps: [
        echo('maybe', { target: { group: 'missing' }, if_no_targets: 'skip' }),
        echo('after', { target: { node: 'db-1' } }),
      ],
    });
    const skipped = await drive(skipping);
    expect(skipped.decision.action).toBe('succeed');
    expect(skipped.order).toEqual(['after@db-1']);
  });

  it('starts the run in the write of its first unit, whether the unit goes out or ends before it starts', async () => {
    const planNext = makePlanNext({ runbooks, runs, approvals, clock, callbacks, policy: DEFAULT_POLICY });
    const dispatch = makeDispatch({ inventory, runbooks, runs, approvals, clock, callbacks, queue });
    const first = async (runId: string) => {
      const decision = await planNext(runId);
      if (decision.action !== 'dispatch') throw new Error(`expected a dispatch, got ${decision.action}`);
      await dispatch(runId, decision, 'token-1');
      return (await types(runId)).slice(0, 3);
    };
    const fanned = await startRun({ steps: [echo('hello')] });
    expect(await first(fanned)).toEqual(['run.created', 'run.started', 'policy.decided']);
    expect((await detail(fanned)).run?.status).toBe('running');
    const nowhere = await startRun({ steps: [echo('maybe', { target: { group: 'missing' }, if_no_targets: 'skip' })] });
    expect(await first(nowhere)).toEqual(['run.created', 'run.started', 'step.skipped']);
    expect((await detail(nowhere)).run?.status).toBe('running');
  });

  it('retries only the targets that failed', async () => {
    const runId = await startRun({ steps: [echo('again', { retries: 1 })] });
    let first = true;
    const { decision, order } = await drive(runId, (cmd) => {
      if (cmd.targetId === 'web-2' && first) {
        first = false;
        return { outcome: 'failed', error: { code: 'FLAKY', message: 'once', retryable: true } };
      }
      return { outcome: 'succeeded' };
    });
    expect(decision.action).toBe('succeed');
    expect(order.filter((o) => o === 'again@web-2')).toHaveLength(2);
    expect(order).toHaveLength(6);
  });

  it('lets each target advance through a pipeline phase on its own, with per-target conditions', async () => {
    const runId = await startRun({
      phases: [
        {
          id: 'rolling',
          mode: 'pipeline',
          max_concurrency: 2,
          steps: [
            echo('drain'),
            echo('restart', { retries: 1 }),
            echo('verify'),
            echo('recover', { condition: 'on_failure' }),
          ],
        },
      ],
    });
    let restartFailures = 0;
    const { decision, order } = await drive(runId, (cmd) => {
      if (cmd.stepId === 'restart' && cmd.targetId === 'web-3' && restartFailures++ < 2)
        return { outcome: 'failed', error: { code: 'DOWN', message: 'did not come back', retryable: true } };
      return { outcome: 'succeeded' };
    });
    // web-1 finishes its whole pipeline before web-3 or web-5 has started.
    expect(order.indexOf('verify@web-1')).toBeLessThan(order.indexOf('drain@web-3'));
    expect(order.filter((o) => o === 'restart@web-3')).toHaveLength(2);
    expect(order).toContain('recover@web-3');
    expect(order).not.toContain('verify@web-3');
    expect(order).not.toContain('recover@web-1');
    expect(decision).toMatchObject({ action: 'fail' });
    if (decision.action === 'fail') expect(decision.error.message).toMatch(/1 of 5 target\(s\) failed/);
    const { events } = await detail(runId);
    expect(events.filter((e) => e.type === 'step.dispatched')).toHaveLength(1);
  });

  it('runs a phase whose condition is on_failure only after a failure', async () => {
    const runId = await startRun({
      strategy: 'continue',
      phases: [
        { id: 'work', steps: [echo('work', { target: { node: 'db-1' } })] },
        { id: 'cleanup', condition: 'on_failure', steps: [echo('cleanup', { target: { node: 'db-1' } })] },
        { id: 'report', steps: [echo('report', { target: { node: 'db-1' }, condition: 'always' })] },
      ],
    });
    const { order } = await drive(runId);
    expect(order).toEqual(['work@db-1', 'report@db-1']);
  });

  it('fails a target whose agent node is offline at once, and goes on with the others', async () => {
    await inventory.registerAgent(
      { id: 'agent-1', tenantId: 'acme', groups: ['agents'], attributes: {}, workerId: 'w-1' },
      clock.now(),
    );
    clock.advance(60_000);
    await inventory.registerAgent(
      { id: 'agent-2', tenantId: 'acme', groups: ['agents'], attributes: {}, workerId: 'w-2' },
      clock.now(),
    );
    const runId = await startRun({
      strategy: 'continue',
      steps: [echo('ping', { target: { group: 'agents' }, max_concurrency: 1 })],
    });
    const { decision, order } = await drive(runId);
    expect(order).toEqual(['ping@agent-2']);
    expect(decision).toMatchObject({ action: 'fail' });
    const failed = (await runs.executions(runId)).find((e) => e.targetId === 'agent-1');
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'TARGET_OFFLINE' } });
  });

  it('undoes a pipeline step that failed for good with its own rollback, on that target only', async () => {
    const runId = await startRun({
      phases: [
        {
          id: 'rolling',
          mode: 'pipeline',
          steps: [
            echo('restart', {
              rollback: { backend: 'test', action: 'echo', params: { message: 'start {{ target.id }}' } },
            }),
            echo('verify'),
          ],
        },
      ],
    });
    const { decision } = await drive(runId, (cmd) =>
      cmd.stepId === 'restart' && cmd.kind === 'step' && cmd.targetId === 'web-2'
        ? { outcome: 'failed', error: { code: 'DOWN', message: 'no', retryable: false } }
        : { outcome: 'succeeded' },
    );
    const rollbacks = queue.sent.filter((s) => s.command.kind === 'rollback').map((s) => s.command);
    expect(rollbacks.map((c) => [c.targetId, c.params.message])).toEqual([['web-2', 'start web-2']]);
    expect(queue.sent.some((s) => s.command.stepId === 'verify' && s.command.targetId === 'web-2')).toBe(false);
    expect(decision).toMatchObject({ action: 'fail' });
  });
});

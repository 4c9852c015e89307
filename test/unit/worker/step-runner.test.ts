import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ActionError, sleep } from '../../../worker-container/backends/types.js';
import { RedactingLog } from '../../../worker-container/log-redaction.js';
import { StepRunner } from '../../../worker-container/step-runner.js';
import type { StepCommand } from '../../../shared/domain/messages.js';
import { command, fakeBackend, fakeResults } from './fakes.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

function runner(more: { receipt?: Record<string, string>; profile?: 'dev-flex' | 'prod-critical' } = {}) {
  const { results, reported } = fakeResults();
  const logs: Array<{ message: string; fields?: Record<string, unknown> }> = [];
  const violations: StepCommand[] = [];
  const ran: string[] = [];
  const step = new StepRunner({
    workerId: 'worker-1',
    profile: more.profile ?? 'dev-flex',
    backends: [
      fakeBackend({
        echo: async ({ params, output, secrets }) => {
          ran.push('echo');
          output('stdout', `${String(params.message)} ${Object.values(secrets).join(',')}`);
          return { output: { said: `${String(params.message)} ${Object.values(secrets).join(',')}` } };
        },
        sleep: async ({ params, signal }) => {
          ran.push('sleep');
          await sleep(Number(params.ms), signal);
          return {};
        },
      }),
    ],
    secrets: {
      get: async (id) => {
        if (id === 'missing') throw Object.assign(new Error('nope'), { name: 'ResourceNotFoundException' });
        return 'hunter2-secret';
      },
    },
    receipts: { receipt: async () => (more.receipt ? { output: more.receipt } : undefined) },
    results,
    onViolation: (cmd) => violations.push(cmd),
    log: new RedactingLog((message, fields) => logs.push({ message, ...(fields && { fields }) })),
  });
  const finished = () => reported.filter((r) => r.kind === 'finished').map((r) => r.value);
  return { step, reported, finished, logs, violations, ran };
}

describe('the step runner', () => {
  it('reports the receipt of an effect that already happened without running the action', async () => {
    const { step, finished, ran, reported } = runner({ receipt: { said: 'before' } });
    await step.run(command());
    expect(ran).toEqual([]);
    expect(reported.some((r) => r.kind === 'started')).toBe(false);
    expect(finished()).toEqual([{ outcome: 'succeeded', output: { said: 'before' }, fromReceipt: true }]);
  });

  it('refuses an action its sandbox profile does not allow, fail closed, and counts the violation', async () => {
    const { step, finished, ran, violations } = runner({ profile: 'prod-critical' });
    await step.run(command({ backend: 'http', action: 'post', params: { url: 'https://example.com/hook' } }));
    expect(ran).toEqual([]);
    expect(violations).toHaveLength(1);
    expect(finished()).toEqual([
      { outcome: 'failed', error: expect.objectContaining({ code: 'SANDBOX_VIOLATION', retryable: false }) },
    ]);
  });

  it('refuses an action this worker does not implement, and params that do not check', async () => {
    const { step, finished } = runner();
    await step.run(command({ action: 'counter', params: { key: 'k' } }));
    await step.run(command({ params: { message: 7 } }));
    expect(finished()).toEqual([
      { outcome: 'failed', error: expect.objectContaining({ code: 'UNSUPPORTED_ACTION', retryable: false }) },
      { outcome: 'failed', error: expect.objectContaining({ code: 'INVALID_PARAMS', retryable: false }) },
    ]);
  });

  it('runs the action with its secrets and redacts them from its output and result', async () => {
    const { step, finished, reported } = runner();
    await step.run(command({ secrets: ['token'] }));
    expect(reported[0]).toEqual({ kind: 'started', value: ['token'] });
    expect(reported.find((r) => r.kind === 'output')?.value).toEqual([
      { stream: 'stdout', text: 'hello [REDACTED]', streamSeq: 1 },
    ]);
    expect(finished()).toEqual([{ outcome: 'succeeded', output: { said: 'hello [REDACTED]' } }]);
    expect(step.completed).toBe(1);
    expect(step.running.get(command().executionId)).toBeUndefined();
  });

  it('fails the attempt, retryably, when a secret cannot be fetched', async () => {
    const { step, finished, ran } = runner();
    await step.run(command({ secrets: ['missing'] }));
    expect(ran).toEqual([]);
    expect(finished()).toEqual([
      { outcome: 'failed', error: expect.objectContaining({ code: 'SECRET_UNAVAILABLE', retryable: true }) },
    ]);
  });

  it('times the action out at the step timeout', async () => {
    const { step, finished } = runner();
    const running = step.run(command({ action: 'sleep', params: { ms: 60_000 }, timeoutMs: 5000 }));
    await vi.advanceTimersByTimeAsync(4999);
    expect(finished()).toEqual([]);
    expect(step.running.get(command().executionId)).toBeDefined();
    await vi.advanceTimersByTimeAsync(1);
    await running;
    expect(finished()).toEqual([
      {
        outcome: 'timed_out',
        error: { code: 'STEP_TIMEOUT', message: 'the step exceeded its timeout of 5000 ms', retryable: true },
      },
    ]);
  });

  it('records no result when the lease was lost mid-action', async () => {
    const { step, finished, logs } = runner();
    const running = step.run(command({ action: 'sleep', params: { ms: 60_000 } }));
    await vi.advanceTimersByTimeAsync(10);
    step.running
      .get(command().executionId)
      ?.controller.abort(new ActionError('LEASE_LOST', 'the lease was taken over', true));
    await running;
    expect(finished()).toEqual([]);
    expect(step.completed).toBe(0);
    expect(logs.map((l) => l.message)).toContain('lease lost; the result is not recorded');
  });

  it("redacts each running step's secrets from the worker's log, whichever step logged, until that step ends", () => {
    const lines: Array<Record<string, unknown> | undefined> = [];
    const log = new RedactingLog((_message, fields) => lines.push(fields));
    log.hold('a', ['secret-of-a']);
    log.hold('b', ['secret-of-b']);
    log.log('failed', { error: 'secret-of-a and secret-of-b' });
    log.forget('a');
    log.log('failed', { error: 'secret-of-a and secret-of-b' });
    log.forget('b');
    log.log('failed', { error: 'secret-of-b' });
    expect(lines).toEqual([
      { error: '[REDACTED] and [REDACTED]' },
      { error: 'secret-of-a and [REDACTED]' },
      { error: 'secret-of-b' },
    ]);
  });

  it("masks a step's secret whole when another step's secret is part of it", () => {
    const lines: Array<Record<string, unknown> | undefined> = [];
    const log = new RedactingLog((_message, fields) => lines.push(fields));
    log.hold('a', ['hunter2pw']);
    log.hold('b', ['hunter2pw-SUPERSECRETTAIL']);
    log.log('failed', { error: 'connect failed hunter2pw-SUPERSECRETTAIL' });
    expect(lines).toEqual([{ error: 'connect failed [REDACTED]' }]);
  });
});

import type { Heartbeat as HeartbeatBody, WorkerStore } from '../../../shared/app/ports.js';
import type { StepResults } from '../../../shared/app/step-results.js';
import type { CommandSource, ReceivedCommand } from '../../../shared/app/worker-ports.js';
import type { Worker } from '../../../shared/domain/entities.js';
import type { StepCommand } from '../../../shared/domain/messages.js';
import type { Backend } from '../../../worker-container/backends/types.js';

/** A step command for the `test` backend. */
export const command = (more: Partial<StepCommand> = {}): StepCommand => ({
  v: 1,
  executionId: 'run-1.step.nap.1.once',
  runId: 'run-1',
  tenantId: 'acme',
  stepId: 'nap',
  kind: 'step',
  targetId: 'once',
  attempt: 1,
  idempotencyKey: 'run-1.step.nap.once',
  backend: 'test',
  action: 'echo',
  params: { message: 'hello' },
  timeoutMs: 60_000,
  secrets: [],
  sandboxProfile: 'dev-flex',
  ...more,
});

/** A worker registry that keeps what it was told. */
export function fakeWorkerStore(
  reply: { accepted: boolean; drainRequested: boolean } = { accepted: true, drainRequested: false },
) {
  const registered: Worker[] = [];
  const beats: HeartbeatBody[] = [];
  const statuses: string[] = [];
  const store: WorkerStore = {
    register: async (worker) => void registered.push(worker),
    heartbeat: async (_id, beat) => {
      beats.push(beat);
      return reply;
    },
    setStatus: async (_id, status) => {
      statuses.push(status);
      return true;
    },
    clearCurrent: async () => true,
    requestDrain: async () => true,
    list: async () => [],
  };
  return { store, registered, beats, statuses };
}

/** Step results as a list of what was reported. */
export function fakeResults() {
  const reported: Array<{ kind: 'started' | 'output' | 'finished'; value: unknown }> = [];
  const results: Pick<StepResults, 'started' | 'output' | 'finished'> = {
    started: async (_cmd, _worker, secretIds) => void reported.push({ kind: 'started', value: secretIds }),
    output: async (_cmd, _worker, chunks) => void reported.push({ kind: 'output', value: [...chunks] }),
    // The last lines ride with the result, recorded as output before it, as the store does.
    finished: async (_cmd, _worker, outcome, lastOutput = []) => {
      if (lastOutput.length > 0) reported.push({ kind: 'output', value: [...lastOutput] });
      reported.push({ kind: 'finished', value: outcome });
    },
  };
  return { results, reported };
}

/** A command source fed by the test; `receive` waits until something is queued or it is closed. */
export function fakeCommandSource() {
  const queued: ReceivedCommand[] = [];
  const deleted: string[] = [];
  const released: string[] = [];
  let wake: (() => void) | undefined;
  const source: CommandSource = {
    receive: async (max = 1) => {
      if (queued.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      return queued.splice(0, max);
    },
    delete: async (c) => void deleted.push(c.id),
    release: async (c) => void released.push(c.id),
  };
  return {
    source,
    deleted,
    released,
    push(cmd: StepCommand, id = cmd.executionId) {
      queued.push({ id, body: JSON.stringify(cmd), handle: id });
      wake?.();
    },
    /** Ends a pending receive empty-handed. */
    idle() {
      wake?.();
    },
  };
}

/** A `test`-named backend whose `echo` and `sleep` the test controls. */
export function fakeBackend(actions: Backend['actions']): Backend {
  return { name: 'test', actions };
}

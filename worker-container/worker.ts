import { DeleteMessageCommand, type Message, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { RunStore } from '../shared/adapters/dynamodb/run-store.js';
import type { Outcome, StepResults } from '../shared/app/step-results.js';
import { checkAction } from '../shared/domain/catalogue.js';
import { type StepCommand, stepCommandSchema } from '../shared/domain/messages.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import { ActionError, type Backend } from './backends/types.js';

export interface WorkerOptions {
  readonly workerId: string;
  readonly profile: SandboxProfileName;
  readonly queueUrl: string;
  readonly sqs: SQSClient;
  readonly runs: RunStore;
  readonly results: StepResults;
  readonly backends: readonly Backend[];
  readonly leaseMs: number;
  readonly log: (message: string, fields?: Record<string, unknown>) => void;
  /** Output flushed as events at most this often. */
  readonly outputFlushMs?: number;
  /** Output kept per step execution before it is cut with a marker. */
  readonly outputCapBytes?: number;
}

interface Chunk {
  stream: 'stdout' | 'stderr';
  text: string;
  streamSeq: number;
}

/**
 * The worker core loop: long-poll the profile's queue; for each command take the DynamoDB lease
 * (authoritative; queue visibility is only advisory), reuse a receipt if the effect already
 * happened, otherwise run the action with its timeout while renewing the lease and streaming its
 * output, then record the result (with the receipt) and delete the message.
 */
export class Worker {
  private receiving = true;
  private current?: AbortController;
  private idle?: Promise<void>;
  completed = 0;

  constructor(private readonly options: WorkerOptions) {}

  get busy(): boolean {
    return this.current !== undefined;
  }

  /** Receives and handles commands until `stop` is called. */
  async run(): Promise<void> {
    const { sqs, queueUrl } = this.options;
    while (this.receiving) {
      let messages: Message[] = [];
      try {
        ({ Messages: messages = [] } = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 5 }),
        ));
      } catch (error) {
        if (!this.receiving) break;
        this.options.log('receive failed', { error: (error as Error).message });
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      for (const message of messages) {
        try {
          await this.handle(message);
        } catch (error) {
          // The message stays; it is received again after its visibility timeout.
          this.options.log('command failed', { error: (error as Error).message, stack: (error as Error).stack });
        }
      }
    }
  }

  /** Stops receiving; resolves when the current step execution (if any) has been recorded. */
  async stop(): Promise<void> {
    this.receiving = false;
    await this.idle;
  }

  /** Aborts the current action at once (a second SIGTERM). */
  abort(): void {
    this.current?.abort(new ActionError('WORKER_STOPPED', 'the worker was stopped', true));
  }

  private async deleteMessage(message: Message): Promise<void> {
    await this.options.sqs.send(
      new DeleteMessageCommand({ QueueUrl: this.options.queueUrl, ReceiptHandle: message.ReceiptHandle }),
    );
  }

  private async handle(message: Message): Promise<void> {
    const parsed = stepCommandSchema.safeParse(JSON.parse(message.Body ?? 'null'));
    if (!parsed.success) {
      // Not a command this worker understands: leave it for the dead-letter queue.
      this.options.log('malformed command', { messageId: message.MessageId });
      return;
    }
    const cmd = parsed.data;
    const { runs, workerId, leaseMs } = this.options;
    const leased = await runs.acquireLease(cmd.runId, cmd.executionId, workerId, new Date(), leaseMs);
    if (!leased) {
      // Done already, or another worker holds the lease: this delivery is a duplicate.
      this.options.log('duplicate delivery skipped', { executionId: cmd.executionId });
      await this.deleteMessage(message);
      return;
    }
    const done = this.execute(cmd);
    this.idle = done.then(
      () => undefined,
      () => undefined,
    );
    await done;
    await this.deleteMessage(message);
  }

  private async execute(cmd: StepCommand): Promise<void> {
    const { runs, results, workerId, leaseMs } = this.options;
    const receipt = await runs.receipt(cmd.idempotencyKey);
    if (receipt) {
      this.options.log('receipt found; reporting the recorded result', { executionId: cmd.executionId });
      await results.finished(cmd, workerId, { outcome: 'succeeded', output: receipt.output ?? {}, fromReceipt: true });
      return;
    }
    await results.started(cmd, workerId);
    const controller = new AbortController();
    this.current = controller;
    let leaseLost = false;
    const renew = setInterval(
      () => {
        runs
          .renewLease(cmd.runId, cmd.executionId, workerId, new Date(Date.now() + leaseMs))
          .then((held) => {
            if (!held) {
              leaseLost = true;
              controller.abort(new ActionError('LEASE_LOST', 'the lease was taken over', true));
            }
          })
          .catch((error: unknown) => this.options.log('lease renewal failed', { error: (error as Error).message }));
      },
      Math.max(1000, Math.floor(leaseMs / 3)),
    );
    const timeout = setTimeout(
      () =>
        controller.abort(new ActionError('STEP_TIMEOUT', `the step exceeded its timeout of ${cmd.timeoutMs} ms`, true)),
      cmd.timeoutMs,
    );
    const output = this.outputStream(cmd);
    let outcome: Outcome;
    try {
      const result = await this.runAction(cmd, controller.signal, output.push);
      outcome = { outcome: 'succeeded', ...(result.output && { output: result.output }) };
    } catch (error) {
      const failure =
        error instanceof ActionError
          ? error
          : new ActionError('ACTION_ERROR', (error as Error).message ?? String(error), true);
      outcome = {
        outcome: failure.code === 'STEP_TIMEOUT' ? 'timed_out' : 'failed',
        error: { code: failure.code, message: failure.message, retryable: failure.retryable },
      };
    } finally {
      clearInterval(renew);
      clearTimeout(timeout);
      this.current = undefined;
    }
    await output.close();
    if (leaseLost) {
      this.options.log('lease lost; the result is not recorded', { executionId: cmd.executionId });
      return;
    }
    await results.finished(cmd, workerId, outcome);
    this.completed++;
  }

  private async runAction(
    cmd: StepCommand,
    signal: AbortSignal,
    push: (stream: 'stdout' | 'stderr', text: string) => void,
  ) {
    // Fail closed: the dispatcher checked the profile, and the worker checks again.
    if (!profileAllows(SANDBOX_PROFILES[this.options.profile], cmd.backend, cmd.action))
      throw new ActionError(
        'SANDBOX_VIOLATION',
        `${cmd.backend}.${cmd.action} is not allowed by sandbox profile ${this.options.profile}`,
        false,
      );
    const backend = this.options.backends.find((b) => b.name === cmd.backend);
    const handler = backend && Object.hasOwn(backend.actions, cmd.action) ? backend.actions[cmd.action] : undefined;
    if (!handler) throw new ActionError('UNSUPPORTED_ACTION', `this worker has no ${cmd.backend}.${cmd.action}`, false);
    const checked = checkAction(cmd.backend, cmd.action, cmd.params, ['params']);
    if (!checked.ok)
      throw new ActionError(
        'INVALID_PARAMS',
        checked.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
        false,
      );
    const aborted = new Promise<never>((_, reject) =>
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }),
    );
    return Promise.race([
      handler({ params: checked.params, attempt: cmd.attempt, signal, secrets: {}, output: push }),
      aborted,
    ]);
  }

  /** Buffers output lines and records them as `step.output` events in batches, capped per execution. */
  private outputStream(cmd: StepCommand) {
    const { results, workerId } = this.options;
    const cap = this.options.outputCapBytes ?? 64 * 1024;
    let pending: Chunk[] = [];
    let streamSeq = 0;
    let bytes = 0;
    let truncated = false;
    let flushing: Promise<void> = Promise.resolve();
    const flush = () => {
      const batch = pending;
      pending = [];
      if (batch.length === 0) return flushing;
      flushing = flushing
        .then(() => results.output(cmd, workerId, batch))
        .catch((error: unknown) => this.options.log('output not recorded', { error: (error as Error).message }));
      return flushing;
    };
    const timer = setInterval(() => void flush(), this.options.outputFlushMs ?? 250);
    return {
      push: (stream: 'stdout' | 'stderr', text: string) => {
        if (truncated) return;
        bytes += Buffer.byteLength(text);
        if (bytes > cap) {
          truncated = true;
          pending.push({ stream: 'stderr', text: `[output truncated after ${cap} bytes]`, streamSeq: ++streamSeq });
          return;
        }
        pending.push({ stream, text, streamSeq: ++streamSeq });
      },
      close: async () => {
        clearInterval(timer);
        await flush();
      },
    };
  }
}

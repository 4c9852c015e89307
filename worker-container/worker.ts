import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { RunStore } from '../shared/adapters/dynamodb/run-store.js';
import type { RecoverLost } from '../shared/app/recovery.js';
import type { Outcome, StepResults } from '../shared/app/step-results.js';
import type { WorkerStore } from '../shared/app/ports.js';
import { checkAction } from '../shared/domain/catalogue.js';
import type { Worker as WorkerRecord } from '../shared/domain/entities.js';
import { type StepCommand, stepCommandSchema } from '../shared/domain/messages.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import type { SecretSource } from '../shared/adapters/secrets.js';
import { makeRedactor, type Redact, redactJson } from '../shared/domain/redaction.js';
import type { ArtifactStore } from './artifacts.js';
import { ActionError, type ActionHandler, type ActionResult, type Backend } from './backends/types.js';

/** What a worker tells the registry about itself when it starts. */
export type WorkerRegistration = Pick<
  WorkerRecord,
  'hostname' | 'pid' | 'environment' | 'backends' | 'groups' | 'version'
>;

export interface WorkerOptions {
  readonly workerId: string;
  readonly registration: WorkerRegistration;
  readonly workers: WorkerStore;
  /** How often the worker heartbeats and renews the lease of its current step execution. */
  readonly heartbeatMs: number;
  /** Step secrets by id (cached at most five minutes). */
  readonly secrets: SecretSource;
  /** Patterns redacted from outputs, events and logs besides the step's secret values. */
  readonly redactPatterns?: readonly RegExp[];
  /** Called when the worker refuses a step its sandbox profile does not allow (for the metric). */
  readonly onViolation?: (cmd: StepCommand) => void;
  /** Called when an operator asked this worker to drain (seen with a heartbeat). */
  readonly onDrainRequested?: () => void;
  readonly profile: SandboxProfileName;
  readonly queueUrl: string;
  readonly sqs: SQSClient;
  readonly runs: RunStore;
  readonly results: StepResults;
  /** Ends a step execution whose holder was lost mid-action (the reconciler's rule). */
  readonly recover: RecoverLost;
  readonly backends: readonly Backend[];
  readonly leaseMs: number;
  readonly log: (message: string, fields?: Record<string, unknown>) => void;
  /** Output flushed as events at most this often. */
  readonly outputFlushMs?: number;
  /** Output kept per step execution before it is cut with a marker. */
  readonly outputCapBytes?: number;
  /** Where steps store the files they produce. */
  readonly artifacts?: ArtifactStore;
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
  private current?: { readonly cmd: StepCommand; readonly controller: AbortController };
  private idle?: Promise<void>;
  private finished?: Promise<void>;
  private cpu = { usage: process.cpuUsage(), at: performance.now() };
  private redact?: Redact;
  completed = 0;

  constructor(private readonly options: WorkerOptions) {}

  get busy(): boolean {
    return this.current !== undefined;
  }

  /** Registers, then receives and handles commands until `stop`; deregisters on the way out. */
  run(): Promise<void> {
    this.finished ??= this.loop();
    return this.finished;
  }

  private async register(): Promise<void> {
    const now = new Date().toISOString();
    await this.options.workers.register({
      workerId: this.options.workerId,
      sandboxProfile: this.options.profile,
      ...this.options.registration,
      status: 'idle',
      registeredAt: now,
      lastHeartbeatAt: now,
      stats: { cpuPercent: 0, rssBytes: process.memoryUsage().rss, tasksCompleted: 0 },
    });
  }

  /**
   * One heartbeat: renews the current step execution's lease, then reports status and load. A
   * lease that cannot be renewed means another worker took the step over: stop working on it.
   */
  async beat(): Promise<void> {
    const { runs, workerId, workers, leaseMs } = this.options;
    const current = this.current;
    if (current) {
      const held = await runs.renewLease(
        current.cmd.runId,
        current.cmd.executionId,
        workerId,
        new Date(Date.now() + leaseMs),
      );
      if (!held) current.controller.abort(new ActionError('LEASE_LOST', 'the lease was taken over', true));
    }
    const usage = process.cpuUsage();
    const at = performance.now();
    const cpuMicros = usage.user - this.cpu.usage.user + (usage.system - this.cpu.usage.system);
    const cpuPercent = Math.round((cpuMicros / 1000 / Math.max(1, at - this.cpu.at)) * 1000) / 10;
    this.cpu = { usage, at };
    const reply = await workers.heartbeat(workerId, {
      status: this.receiving ? (this.current ? 'busy' : 'idle') : 'draining',
      at: new Date().toISOString(),
      ...(this.current && { currentExecutionId: this.current.cmd.executionId }),
      stats: { cpuPercent, rssBytes: process.memoryUsage().rss, tasksCompleted: this.completed },
    });
    if (!reply.accepted && this.receiving) {
      // Declared dead while alive (a long pause): its leases were recovered; start afresh.
      this.options.log('declared dead by the reconciler; registering again');
      await this.register();
    }
    if (reply.drainRequested && this.receiving) {
      this.options.log('drain requested');
      this.options.onDrainRequested?.();
    }
  }

  private async loop(): Promise<void> {
    const { sqs, queueUrl } = this.options;
    await this.register();
    const heartbeat = setInterval(() => {
      this.beat().catch((error: unknown) => this.options.log('heartbeat failed', { error: (error as Error).message }));
    }, this.options.heartbeatMs);
    try {
      await this.receiveLoop(sqs, queueUrl);
      await this.idle;
    } finally {
      clearInterval(heartbeat);
    }
    await this.options.workers.setStatus(this.options.workerId, 'deregistered');
    this.options.log('deregistered', { tasksCompleted: this.completed });
  }

  private async receiveLoop(sqs: SQSClient, queueUrl: string): Promise<void> {
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
      if (!this.receiving) {
        // Received while starting to drain: hand it straight back for another worker.
        await this.release(messages);
        break;
      }
      for (const message of messages) {
        try {
          await this.handle(message);
        } catch (error) {
          // The message stays; it is received again after its visibility timeout.
          this.log('command failed', { error: (error as Error).message, stack: (error as Error).stack });
        }
      }
    }
  }

  /**
   * Drains: stops receiving, lets the current step execution finish (its own timeout bounds it),
   * deregisters; resolves when all of that is done.
   */
  async stop(): Promise<void> {
    if (this.receiving) {
      this.receiving = false;
      this.beat().catch(() => undefined);
    }
    await this.run();
  }

  /**
   * Gives up at once (a second SIGTERM): releases the current lease so the reconciler recovers
   * the step execution in its next sweep instead of after the lease runs out.
   */
  async abort(): Promise<void> {
    const current = this.current;
    if (!current) return;
    current.controller.abort(new ActionError('WORKER_STOPPED', 'the worker was stopped', true));
    await this.options.runs.renewLease(current.cmd.runId, current.cmd.executionId, this.options.workerId, new Date());
  }

  private async release(messages: readonly Message[]): Promise<void> {
    for (const message of messages)
      await this.options.sqs
        .send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: this.options.queueUrl,
            ReceiptHandle: message.ReceiptHandle,
            VisibilityTimeout: 0,
          }),
        )
        .catch((error: unknown) => this.log('could not release a message', { error: (error as Error).message }));
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
      this.log('malformed command', { messageId: message.MessageId });
      return;
    }
    const cmd = parsed.data;
    const { runs, workerId, leaseMs } = this.options;
    const asked = performance.now();
    const lease = await runs.acquireLease(cmd.runId, cmd.executionId, workerId, new Date(), leaseMs);
    if (lease.claim === 'lost') {
      // Its holder died mid-action: that attempt ends by the recovery rule (the reconciler's), and
      // is never started again as the same attempt.
      const verdict = await this.options.recover(lease.execution, cmd, new Date());
      this.log('lost step execution ended', {
        executionId: cmd.executionId,
        verdict: verdict?.kind ?? 'ended already',
      });
      await this.deleteMessage(message);
      return;
    }
    if (lease.claim !== 'lease') {
      // Done already, or another worker holds the lease: this delivery is a duplicate.
      this.log('duplicate delivery skipped', { executionId: cmd.executionId, claim: lease.claim });
      await this.deleteMessage(message);
      return;
    }
    this.log('lease acquired', {
      executionId: cmd.executionId,
      acquireMs: Math.round((performance.now() - asked) * 10) / 10,
    });
    const done = this.execute(cmd);
    this.idle = done.then(
      () => undefined,
      () => undefined,
    );
    await done;
    await this.deleteMessage(message);
  }

  /**
   * What the worker needs to run a command, or why it refuses: the profile must allow the action
   * (checked again here, fail closed), this worker must implement it, and its params must check.
   */
  private prepare(cmd: StepCommand): { handler: ActionHandler; params: Record<string, unknown>; secretIds: string[] } {
    if (!profileAllows(SANDBOX_PROFILES[this.options.profile], cmd.backend, cmd.action))
      throw new ActionError(
        'SANDBOX_VIOLATION',
        `${cmd.backend}.${cmd.action} is not allowed by sandbox profile ${this.options.profile}`,
        false,
      );
    const backend = this.options.backends.find((b) => b.name === cmd.backend);
    const handler = backend && Object.hasOwn(backend.actions, cmd.action) ? backend.actions[cmd.action] : undefined;
    if (!backend || !handler)
      throw new ActionError('UNSUPPORTED_ACTION', `this worker has no ${cmd.backend}.${cmd.action}`, false);
    const checked = checkAction(cmd.backend, cmd.action, cmd.params, ['params']);
    if (!checked.ok)
      throw new ActionError(
        'INVALID_PARAMS',
        checked.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '),
        false,
      );
    const secretIds = [...new Set([...cmd.secrets, ...(backend.secretsFor?.(cmd.action, checked.params) ?? [])])];
    return { handler, params: checked.params, secretIds };
  }

  /** The step's secrets, fetched now; a secret that cannot be fetched fails the attempt (retryable). */
  private async fetchSecrets(ids: readonly string[]): Promise<Record<string, string>> {
    const secrets: Record<string, string> = {};
    for (const id of ids) {
      try {
        secrets[id] = await this.options.secrets.get(id);
      } catch (error) {
        throw new ActionError(
          'SECRET_UNAVAILABLE',
          `secret '${id}' could not be fetched: ${(error as Error).name}`,
          true,
        );
      }
    }
    return secrets;
  }

  private async execute(cmd: StepCommand): Promise<void> {
    const { runs, results, workerId } = this.options;
    const receipt = await runs.receipt(cmd.idempotencyKey);
    if (receipt) {
      this.log('receipt found; reporting the recorded result', { executionId: cmd.executionId });
      await results.finished(cmd, workerId, { outcome: 'succeeded', output: receipt.output ?? {}, fromReceipt: true });
      return;
    }
    let prepared: ReturnType<Worker['prepare']>;
    try {
      prepared = this.prepare(cmd);
    } catch (error) {
      const refusal = error as ActionError;
      if (refusal.code === 'SANDBOX_VIOLATION') this.options.onViolation?.(cmd);
      this.log('step refused', { executionId: cmd.executionId, code: refusal.code, reason: refusal.message });
      await results.finished(cmd, workerId, {
        outcome: 'failed',
        error: { code: refusal.code, message: refusal.message, retryable: refusal.retryable },
      });
      return;
    }
    await results.started(cmd, workerId, prepared.secretIds);
    const controller = new AbortController();
    this.current = { cmd, controller };
    const timeout = setTimeout(
      () =>
        controller.abort(new ActionError('STEP_TIMEOUT', `the step exceeded its timeout of ${cmd.timeoutMs} ms`, true)),
      cmd.timeoutMs,
    );
    let redact: Redact = makeRedactor([], this.options.redactPatterns);
    const output = this.outputStream(cmd, (text) => redact(text));
    let outcome: Outcome;
    try {
      const secrets = await this.fetchSecrets(prepared.secretIds);
      redact = makeRedactor(Object.values(secrets), this.options.redactPatterns);
      this.redact = redact;
      const result = await this.runAction(prepared, cmd, secrets, controller.signal, output.push);
      outcome = { outcome: 'succeeded', ...(result.output && { output: redactJson(result.output, redact) }) };
    } catch (error) {
      const failure =
        error instanceof ActionError
          ? error
          : new ActionError('ACTION_ERROR', (error as Error).message ?? String(error), true);
      outcome = {
        outcome: failure.code === 'STEP_TIMEOUT' ? 'timed_out' : 'failed',
        error: { code: failure.code, message: redact(failure.message), retryable: failure.retryable },
      };
    } finally {
      clearTimeout(timeout);
      this.current = undefined;
    }
    await output.close();
    // The values go with the step: nothing of them outlives it in this worker.
    this.redact = undefined;
    const leaseLost = controller.signal.aborted && (controller.signal.reason as ActionError).code === 'LEASE_LOST';
    if (leaseLost) {
      this.log('lease lost; the result is not recorded', { executionId: cmd.executionId });
      return;
    }
    await results.finished(cmd, workerId, outcome);
    this.completed++;
  }

  private async runAction(
    prepared: { handler: ActionHandler; params: Record<string, unknown> },
    cmd: StepCommand,
    secrets: Readonly<Record<string, string>>,
    signal: AbortSignal,
    push: (stream: 'stdout' | 'stderr', text: string) => void,
  ): Promise<ActionResult> {
    const aborted = new Promise<never>((_, reject) =>
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }),
    );
    return Promise.race([
      prepared.handler({
        params: prepared.params,
        attempt: cmd.attempt,
        signal,
        secrets,
        output: push,
        ...(this.options.artifacts && { artifact: this.options.artifacts.sinkFor(cmd, this.options.workerId) }),
      }),
      aborted,
    ]);
  }

  /** Logs with the current step's secrets redacted from every field. */
  private log(message: string, fields?: Record<string, unknown>): void {
    const redact = this.redact;
    this.options.log(message, fields && redact ? redactJson(fields, redact) : fields);
  }

  /** Buffers output lines and records them as `step.output` events in batches, capped per execution. */
  private outputStream(cmd: StepCommand, redact: Redact) {
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
      push: (stream: 'stdout' | 'stderr', raw: string) => {
        if (truncated) return;
        const text = redact(raw);
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

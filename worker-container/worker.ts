import type { RunStore } from '../shared/adapters/dynamodb/run-store.js';
import type { SecretSource } from '../shared/adapters/secrets.js';
import type { WorkerStore } from '../shared/app/ports.js';
import type { RecoverLost } from '../shared/app/recovery.js';
import type { StepResults } from '../shared/app/step-results.js';
import type { AgentNode, CommandSource, ReceivedCommand } from '../shared/app/worker-ports.js';
import { type StepCommand, stepCommandSchema } from '../shared/domain/messages.js';
import type { SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import { ActionError, type Backend } from './backends/types.js';
import { Heartbeat, type WorkerRegistration } from './heartbeat.js';
import { type Log, RedactingLog } from './log-redaction.js';
import { StepRunner } from './step-runner.js';
import type { ArtifactStore } from './artifacts.js';
import { withLogContext } from '../shared/observability/logger.js';
import { flushMetrics, recordMetric } from '../shared/observability/metrics.js';
import { withSpan } from '../shared/observability/tracing.js';
import type { Later } from '../shared/app/later.js';

export type { WorkerRegistration } from './heartbeat.js';

export interface WorkerOptions {
  readonly workerId: string;
  readonly registration: WorkerRegistration;
  readonly workers: WorkerStore;
  /** The worker's own node in its tenant's inventory, when it is an agent (it then receives from the node's queue). */
  readonly agent?: AgentNode;
  /** How often the worker heartbeats and renews the leases of its running step executions. */
  readonly heartbeatMs: number;
  /** Step executions the worker runs at once (the profile's `stepsPerWorker`). @default 1 */
  readonly slots?: number;
  /** Step secrets by id (cached at most five minutes). */
  readonly secrets: SecretSource;
  /** Patterns redacted from outputs, events and logs besides the step's secret values. */
  readonly redactPatterns?: readonly RegExp[];
  /** Called when the worker refuses a step its sandbox profile does not allow (for the metric). */
  readonly onViolation?: (cmd: StepCommand) => void;
  /** Called when an operator asked this worker to drain (seen with a heartbeat). */
  readonly onDrainRequested?: () => void;
  readonly profile: SandboxProfileName;
  /** The profile's step commands. */
  readonly commands: CommandSource;
  readonly runs: Pick<RunStore, 'acquireLease' | 'renewLease' | 'receipt'>;
  readonly results: Pick<StepResults, 'started' | 'output' | 'finished'>;
  /** Ends a step execution whose holder was lost mid-action (the reconciler's rule). */
  readonly recover: RecoverLost;
  readonly backends: readonly Backend[];
  readonly leaseMs: number;
  readonly log: Log;
  /** Output flushed as events at most this often. */
  readonly outputFlushMs?: number;
  /** Output kept per step execution before it is cut with a marker. */
  readonly outputCapBytes?: number;
  /** Pause after a failed receive. @default 1000 */
  readonly receiveRetryMs?: number;
  /** Where steps store the files they produce. */
  readonly artifacts?: ArtifactStore;
  /**
   * What the worker lets finish while it takes its next command (a handled command's delete, and
   * the results' resumes when they share it); drained before the worker deregisters.
   */
  readonly later?: Later;
}

/**
 * The worker core loop: receive as many commands as it has free slots; for each, take the
 * DynamoDB lease of its step execution (authoritative; delivery is only advisory), hand it to the
 * step runner and delete the command. The heartbeat renews the leases meanwhile. `stop` drains: no
 * more receiving, the running steps finish, the worker deregisters.
 */
export class Worker {
  private receiving = true;
  /** The commands being handled now, one per busy slot. */
  private readonly handling = new Set<Promise<void>>();
  private readonly slots: number;
  private finished?: Promise<void>;
  private readonly logger: RedactingLog;
  private readonly heartbeat: Heartbeat;
  private readonly runner: StepRunner;

  constructor(private readonly options: WorkerOptions) {
    this.slots = Math.max(1, options.slots ?? 1);
    this.logger = new RedactingLog(options.log, options.redactPatterns);
    this.runner = new StepRunner({ ...options, receipts: options.runs, log: this.logger });
    this.heartbeat = new Heartbeat({
      ...options,
      leases: options.runs,
      activity: () => ({
        receiving: this.receiving,
        running: [...this.runner.running.values()],
        completed: this.runner.completed,
      }),
    });
  }

  get busy(): boolean {
    return this.runner.running.size > 0;
  }

  get completed(): number {
    return this.runner.completed;
  }

  /** Registers, then receives and handles commands until `stop`; deregisters on the way out. */
  run(): Promise<void> {
    this.finished ??= this.loop();
    return this.finished;
  }

  /** One heartbeat now (see `Heartbeat.beat`). */
  beat(): Promise<void> {
    return this.heartbeat.beat();
  }

  /**
   * Drains: stops receiving, lets the running step executions finish (their own timeouts bound
   * them), deregisters; resolves when all of that is done.
   */
  async stop(): Promise<void> {
    if (this.receiving) {
      this.receiving = false;
      this.heartbeat.beat().catch(() => undefined);
    }
    await this.run();
  }

  /**
   * Gives up at once (a second SIGTERM): stops the running actions and releases their leases, so
   * the reconciler recovers those step executions in its next sweep instead of after the leases
   * run out.
   */
  async abort(): Promise<void> {
    const now = new Date();
    // Every release is tried, whichever fails.
    await Promise.allSettled(
      [...this.runner.running.values()].map(async ({ cmd, controller }) => {
        controller.abort(new ActionError('WORKER_STOPPED', 'the worker was stopped', true));
        try {
          await this.options.runs.renewLease(cmd.runId, cmd.executionId, this.options.workerId, now);
        } catch (error) {
          this.logger.log('lease release failed', { executionId: cmd.executionId, error: (error as Error).message });
        }
      }),
    );
  }

  private async loop(): Promise<void> {
    await this.heartbeat.register();
    this.heartbeat.start();
    try {
      await this.receiveLoop();
      await Promise.all(this.handling);
      await this.options.later?.settled();
    } finally {
      this.heartbeat.stop();
    }
    await this.options.workers.setStatus(this.options.workerId, 'deregistered');
    await this.options.agent?.deregister();
    this.options.log('deregistered', { tasksCompleted: this.runner.completed });
  }

  private async receiveLoop(): Promise<void> {
    const { commands } = this.options;
    while (this.receiving) {
      // Wait for a free slot; a step that ends frees one.
      while (this.handling.size >= this.slots) await Promise.race(this.handling);
      if (!this.receiving) break;
      let received: ReceivedCommand[];
      try {
        received = await commands.receive(this.slots - this.handling.size);
      } catch (error) {
        if (!this.receiving) break;
        this.options.log('receive failed', { error: (error as Error).message });
        await new Promise((r) => setTimeout(r, this.options.receiveRetryMs ?? 1000));
        continue;
      }
      if (!this.receiving) {
        // Received while starting to drain: hand it straight back for another worker.
        for (const command of received)
          await commands
            .release(command)
            .catch((error: unknown) =>
              this.logger.log('could not release a message', { error: (error as Error).message }),
            );
        break;
      }
      for (const command of received) this.take(command);
    }
  }

  /** Handles a command in a slot of its own; the slot is free again once the command is handled. */
  private take(command: ReceivedCommand): void {
    const handled: Promise<void> = this.handle(command)
      .catch((error: unknown) => {
        // The command stays; it is received again after its visibility timeout.
        try {
          this.logger.log('command failed', { error: (error as Error).message, stack: (error as Error).stack });
        } catch {
          // A log that throws must not take the worker down with an unhandled rejection.
        }
      })
      .finally(() => this.handling.delete(handled));
    this.handling.add(handled);
  }

  private async handle(received: ReceivedCommand): Promise<void> {
    const parsed = stepCommandSchema.safeParse(JSON.parse(received.body));
    if (!parsed.success) {
      // Not a command this worker understands: leave it for the dead-letter queue.
      this.logger.log('malformed command', { messageId: received.id });
      return;
    }
    const cmd = parsed.data;
    const context = {
      tenantId: cmd.tenantId,
      runId: cmd.runId,
      stepId: cmd.stepId,
      targetId: cmd.targetId,
      workerId: this.options.workerId,
      sandboxProfile: cmd.sandboxProfile,
    };
    try {
      await withLogContext(context, () => this.handleCommand(received, cmd));
    } finally {
      flushMetrics();
    }
  }

  private async handleCommand(received: ReceivedCommand, cmd: StepCommand): Promise<void> {
    const { runs, workerId, leaseMs, commands } = this.options;
    const asked = performance.now();
    const spanOptions = {
      ...(received.traceHeader !== undefined && { parentHeader: received.traceHeader }),
      attributes: { runId: cmd.runId, stepId: cmd.stepId, executionId: cmd.executionId, attempt: cmd.attempt },
    };
    const lease = await withSpan('worker.assign', spanOptions, () =>
      runs.acquireLease(cmd.runId, cmd.executionId, workerId, new Date(), leaseMs),
    );
    recordMetric('workerAssignments', 1, { sandboxProfile: this.options.profile, status: lease.claim });
    if (lease.claim === 'lost') {
      // Its holder died mid-action: that attempt ends by the recovery rule (the reconciler's), and
      // is never started again as the same attempt.
      const verdict = await this.options.recover(lease.execution, cmd, new Date());
      this.logger.log('lost step execution ended', {
        executionId: cmd.executionId,
        verdict: verdict?.kind ?? 'ended already',
      });
      await commands.delete(received);
      return;
    }
    if (lease.claim !== 'lease') {
      // Done already, or another worker holds the lease: this delivery is a duplicate.
      this.logger.log('duplicate delivery skipped', { executionId: cmd.executionId, claim: lease.claim });
      await commands.delete(received);
      return;
    }
    this.logger.log('lease acquired', {
      executionId: cmd.executionId,
      acquireMs: Math.round((performance.now() - asked) * 10) / 10,
    });
    const span = cmd.kind === 'rollback' ? 'rollback.execute' : 'step.execute';
    await withSpan(span, spanOptions, () => this.runner.run(cmd));
    // Deleting the command is the last thing about it: the next one need not wait for it. A delete
    // that is lost only brings a duplicate delivery, which the lease turns away.
    const { later } = this.options;
    if (later) later.run('delete command', commands.delete(received));
    else await commands.delete(received);
  }
}

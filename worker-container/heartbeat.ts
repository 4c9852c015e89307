import type { WorkerStore } from '../shared/app/ports.js';
import type { AgentNode } from '../shared/app/worker-ports.js';
import type { Worker as WorkerRecord } from '../shared/domain/entities.js';
import type { SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import { recordMetric } from '../shared/observability/metrics.js';
import { ActionError } from './backends/types.js';
import type { Log } from './log-redaction.js';
import type { RunningStep } from './step-runner.js';

/** What a worker tells the registry about itself when it starts. */
export type WorkerRegistration = Pick<
  WorkerRecord,
  'hostname' | 'pid' | 'environment' | 'backends' | 'groups' | 'version' | 'taskArn'
>;

/** Renews the lease of a step execution the worker holds; false when it no longer holds it. */
export interface LeaseRenewer {
  renewLease(runId: string, executionId: string, owner: string, until: Date): Promise<boolean>;
}

/** What the worker is doing, as its heartbeat reports it. */
export interface WorkerActivity {
  /** False once the worker started draining. */
  readonly receiving: boolean;
  /** The step executions it runs now, oldest first, each with the controller that stops its action. */
  readonly running: readonly RunningStep[];
  readonly completed: number;
}

export interface HeartbeatOptions {
  readonly workerId: string;
  readonly profile: SandboxProfileName;
  readonly registration: WorkerRegistration;
  readonly workers: WorkerStore;
  /** The worker's own node in its tenant's inventory, when it is an agent. */
  readonly agent?: AgentNode;
  readonly leases: LeaseRenewer;
  /** How often the worker heartbeats and renews the leases of its running step executions. */
  readonly heartbeatMs: number;
  readonly leaseMs: number;
  readonly activity: () => WorkerActivity;
  /** Called when an operator asked this worker to drain (seen with a heartbeat). */
  readonly onDrainRequested?: () => void;
  readonly log: Log;
}

/**
 * The worker's registration and its periodic heartbeat: every `heartbeatMs` it renews the leases
 * of its running step executions (stopping an action whose lease was taken over), then reports
 * its status and load, registering again if it had been declared dead while alive.
 */
export class Heartbeat {
  private cpu = { usage: process.cpuUsage(), at: performance.now() };
  private timer?: NodeJS.Timeout;

  constructor(private readonly options: HeartbeatOptions) {}

  async register(): Promise<void> {
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
    await this.options.agent?.register();
  }

  /**
   * One heartbeat: renews the running step executions' leases, then reports status and load. A
   * lease that cannot be renewed means another worker took that step over: stop working on it.
   */
  async beat(): Promise<void> {
    const { leases, workerId, workers, leaseMs } = this.options;
    const until = new Date(Date.now() + leaseMs);
    // A renewal that fails (not refused: failed) is tried again next beat; the beat goes on.
    await Promise.allSettled(
      this.options.activity().running.map(async ({ cmd, controller }) => {
        try {
          const held = await leases.renewLease(cmd.runId, cmd.executionId, workerId, until);
          if (held) recordMetric('leaseExtensions', 1, { sandboxProfile: this.options.profile });
          else controller.abort(new ActionError('LEASE_LOST', 'the lease was taken over', true));
        } catch (error) {
          this.options.log('lease renewal failed', {
            executionId: cmd.executionId,
            error: (error as Error).message,
          });
        }
      }),
    );
    const usage = process.cpuUsage();
    const at = performance.now();
    const cpuMicros = usage.user - this.cpu.usage.user + (usage.system - this.cpu.usage.system);
    const cpuPercent = Math.round((cpuMicros / 1000 / Math.max(1, at - this.cpu.at)) * 1000) / 10;
    this.cpu = { usage, at };
    // Read again: steps may have ended while the leases were renewed.
    const activity = this.options.activity();
    // The oldest step it still holds: one whose lease was taken over is only winding down.
    const oldest = activity.running.find(({ controller }) => !controller.signal.aborted);
    const reply = await workers.heartbeat(workerId, {
      status: activity.receiving ? (activity.running.length > 0 ? 'busy' : 'idle') : 'draining',
      at: new Date().toISOString(),
      ...(oldest && { currentExecutionId: oldest.cmd.executionId }),
      stats: { cpuPercent, rssBytes: process.memoryUsage().rss, tasksCompleted: activity.completed },
    });
    // The node stays online while its worker lives, draining included; a refused beat registers it again.
    await this.options.agent
      ?.beat()
      .catch((error: unknown) => this.options.log('agent node heartbeat failed', { error: (error as Error).message }));
    if (!reply.accepted && activity.receiving) {
      // Declared dead while alive (a long pause): its leases were recovered; start afresh.
      this.options.log('declared dead by the reconciler; registering again');
      await this.register();
    }
    if (reply.drainRequested && activity.receiving) {
      this.options.log('drain requested');
      this.options.onDrainRequested?.();
    }
  }

  /** Beats every `heartbeatMs` until `stop`; a failed beat is logged and the next one tried. */
  start(): void {
    this.timer ??= setInterval(() => {
      this.beat().catch((error: unknown) => this.options.log('heartbeat failed', { error: (error as Error).message }));
    }, this.options.heartbeatMs);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

import type { Outcome, StepResults } from '../shared/app/step-results.js';
import type { SecretSource } from '../shared/adapters/secrets.js';
import { checkAction } from '../shared/domain/catalogue.js';
import type { Json } from '../shared/domain/canonical.js';
import type { StepCommand } from '../shared/domain/messages.js';
import { makeRedactor, type Redact, redactJson } from '../shared/domain/redaction.js';
import { profileAllows, SANDBOX_PROFILES, type SandboxProfileName } from '../shared/domain/sandbox-profiles.js';
import {
  type ActionContext,
  ActionError,
  type ActionHandler,
  type ActionResult,
  type Backend,
} from './backends/types.js';
import type { RedactingLog } from './log-redaction.js';
import { OutputBuffer, type OutputChunk } from './output-buffer.js';
import type { ArtifactStore } from './artifacts.js';
import { recordMetric } from '../shared/observability/metrics.js';
import { withSpan } from '../shared/observability/tracing.js';

/** Where the recorded result of an effect that already happened is found. */
export interface ReceiptSource {
  receipt(idempotencyKey: string): Promise<{ readonly output?: Record<string, Json> } | undefined>;
}

export interface StepRunnerOptions {
  readonly workerId: string;
  readonly profile: SandboxProfileName;
  readonly backends: readonly Backend[];
  /** Step secrets by id (cached at most five minutes). */
  readonly secrets: SecretSource;
  readonly receipts: ReceiptSource;
  readonly results: Pick<StepResults, 'started' | 'output' | 'finished'>;
  /** Patterns redacted from outputs, events and logs besides the step's secret values. */
  readonly redactPatterns?: readonly RegExp[];
  /** Called when the worker refuses a step its sandbox profile does not allow (for the metric). */
  readonly onViolation?: (cmd: StepCommand) => void;
  /** Output flushed as events at most this often. */
  readonly outputFlushMs?: number;
  /** Output kept per step execution before it is cut with a marker. */
  readonly outputCapBytes?: number;
  readonly log: RedactingLog;
  /** Where steps store the files they produce. */
  readonly artifacts?: ArtifactStore;
}

interface Prepared {
  readonly handler: ActionHandler;
  readonly params: Record<string, unknown>;
  readonly secretIds: string[];
}

/** A step execution whose action runs now, with the controller that stops it. */
export interface RunningStep {
  readonly cmd: StepCommand;
  readonly controller: AbortController;
}

/**
 * Runs one leased step execution: reports the receipt's result if the effect already happened;
 * refuses what the profile or this worker does not allow; otherwise fetches its secrets, runs the
 * action under its timeout (and the heartbeat's abort when the lease is lost), streams its output
 * and records the result, secrets redacted everywhere.
 */
export class StepRunner {
  /** The step executions whose actions run now, by execution id. */
  readonly running = new Map<string, RunningStep>();
  completed = 0;

  constructor(private readonly options: StepRunnerOptions) {}

  async run(cmd: StepCommand): Promise<void> {
    const { receipts, results, workerId, log } = this.options;
    const receipt = await receipts.receipt(cmd.idempotencyKey);
    if (receipt) {
      log.log('receipt found; reporting the recorded result', { executionId: cmd.executionId });
      await results.finished(cmd, workerId, { outcome: 'succeeded', output: receipt.output ?? {}, fromReceipt: true });
      return;
    }
    let prepared: Prepared;
    try {
      prepared = this.prepare(cmd);
    } catch (error) {
      const refusal = error as ActionError;
      if (refusal.code === 'SANDBOX_VIOLATION') this.options.onViolation?.(cmd);
      log.log('step refused', { executionId: cmd.executionId, code: refusal.code, reason: refusal.message });
      await results.finished(cmd, workerId, {
        outcome: 'failed',
        error: { code: refusal.code, message: refusal.message, retryable: refusal.retryable },
      });
      return;
    }
    await results.started(cmd, workerId, prepared.secretIds);
    const executed = await this.execute(cmd, prepared);
    if (executed === 'lease lost') {
      log.log('lease lost; the result is not recorded', { executionId: cmd.executionId });
      return;
    }
    await results.finished(cmd, workerId, executed.outcome, executed.lastOutput);
    this.completed++;
  }

  /** Runs the action under its timeout; `lease lost` when the heartbeat found the lease taken over. */
  private async execute(
    cmd: StepCommand,
    prepared: Prepared,
  ): Promise<{ outcome: Outcome; lastOutput: OutputChunk[] } | 'lease lost'> {
    const { log, redactPatterns, results, workerId } = this.options;
    const controller = new AbortController();
    this.running.set(cmd.executionId, { cmd, controller });
    const timeout = setTimeout(
      () =>
        controller.abort(new ActionError('STEP_TIMEOUT', `the step exceeded its timeout of ${cmd.timeoutMs} ms`, true)),
      cmd.timeoutMs,
    );
    let redact: Redact = makeRedactor([], redactPatterns);
    const output = new OutputBuffer({
      record: (batch) => results.output(cmd, workerId, batch),
      redact: (text) => redact(text),
      onError: (error) => log.log('output not recorded', { error: error.message }),
      ...(this.options.outputFlushMs !== undefined && { flushMs: this.options.outputFlushMs }),
      ...(this.options.outputCapBytes !== undefined && { capBytes: this.options.outputCapBytes }),
    });
    let outcome: Outcome;
    let held: string[] = [];
    const started = performance.now();
    try {
      const secrets = await this.fetchSecrets(prepared.secretIds);
      held = Object.values(secrets);
      redact = makeRedactor(held, redactPatterns);
      log.hold(cmd.executionId, held);
      const artifact = this.options.artifacts?.sinkFor(cmd, this.options.workerId);
      const result = await runAction(prepared, cmd, secrets, controller.signal, output.push, artifact);
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
      this.running.delete(cmd.executionId);
    }
    const environment = SANDBOX_PROFILES[this.options.profile].environment;
    recordMetric('stepDuration', (performance.now() - started) / 1000, { environment, backend: cmd.backend });
    if (cmd.attempt > 1) recordMetric('retries', 1, { backend: cmd.backend });
    if (outcome.outcome !== 'succeeded')
      recordMetric('failures', 1, { backend: cmd.backend, reason: outcome.error.code });
    // What the step printed last is recorded with its result.
    const lastOutput = await output.drain();
    log.forget(cmd.executionId);
    const reason: unknown = controller.signal.reason;
    return controller.signal.aborted && reason instanceof ActionError && reason.code === 'LEASE_LOST'
      ? 'lease lost'
      : { outcome, lastOutput };
  }

  /**
   * What the worker needs to run a command, or why it refuses: the profile must allow the action
   * (checked again here, fail closed), this worker must implement it, and its params must check.
   */
  private prepare(cmd: StepCommand): Prepared {
    const { profile, backends } = this.options;
    if (!profileAllows(SANDBOX_PROFILES[profile], cmd.backend, cmd.action))
      throw new ActionError(
        'SANDBOX_VIOLATION',
        `${cmd.backend}.${cmd.action} is not allowed by sandbox profile ${profile}`,
        false,
      );
    const backend = backends.find((b) => b.name === cmd.backend);
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
    if (ids.length === 0) return {};
    const started = performance.now();
    try {
      return await withSpan('vault.fetch', { attributes: { secrets: ids.length } }, () => this.fetchEach(ids));
    } finally {
      recordMetric('credentialFetch', (performance.now() - started) / 1000, { source: 'secretsmanager' });
    }
  }

  private async fetchEach(ids: readonly string[]): Promise<Record<string, string>> {
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
}

/** The action's result, or the signal's reason as soon as it aborts (an action may ignore its signal). */
function runAction(
  prepared: Prepared,
  cmd: StepCommand,
  secrets: Readonly<Record<string, string>>,
  signal: AbortSignal,
  push: (stream: 'stdout' | 'stderr', text: string) => void,
  artifact: ActionContext['artifact'],
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
      ...(artifact && { artifact }),
    }),
    aborted,
  ]);
}

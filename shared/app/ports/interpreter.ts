import type { Run } from '../../domain/entities.js';
import type { CarriedRun } from './runs.js';
import type { Json } from '../../domain/canonical.js';
import type { StepCommand } from '../../domain/messages.js';
import type { SandboxProfileName } from '../../domain/sandbox-profiles.js';

/** A command the queue refused for good: sending it again cannot succeed. */
export interface RejectedCommand {
  readonly executionId: string;
  readonly code: string;
  readonly message: string;
}

/** Sends step commands to a sandbox profile's queue. */
export interface CommandQueue {
  /**
   * Resolves the commands the queue refused for good (too large, contents it cannot carry);
   * throws when the queue stays unavailable, so the interpreter tries again after a back-off.
   */
  send(profile: SandboxProfileName, commands: readonly StepCommand[]): Promise<readonly RejectedCommand[]>;
}

/** Resumes a waiting interpreter task. */
export interface TaskCallbacks {
  /**
   * Resolves true when the waiting task took the output; false when its token is gone (the task
   * timed out, or a new task waits on the same thing with a new token).
   */
  succeed(taskToken: string, output: Record<string, Json>): Promise<boolean>;
  fail(taskToken: string, error: string, cause: string): Promise<void>;
}

/** Starts a run's interpreter execution, named for the run (starting twice is a no-op); answers its ARN. */
export interface RunStarter {
  /**
   * `carried` is the run as its creation (or admission) just stored it: the execution's first Plan
   * decides on it without reading the run.
   */
  start(run: Pick<Run, 'runId' | 'tenantId'>, carried?: CarriedRun): Promise<string>;
}

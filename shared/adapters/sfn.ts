import {
  type SFNClient,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import type { TaskCallbacks } from '../app/interpreter.js';
import type { RunStarter } from '../app/runs.js';

/** Starts the run interpreter with the run id as the execution name (a second start is a no-op). */
export function makeSfnRunStarter(client: SFNClient, stateMachineArn: string): RunStarter {
  return {
    async start(run) {
      const { executionArn } = await client.send(
        new StartExecutionCommand({
          stateMachineArn,
          name: run.runId,
          input: JSON.stringify({ runId: run.runId, tenantId: run.tenantId }),
        }),
      );
      if (!executionArn) throw new Error('StartExecution returned no execution ARN');
      return executionArn;
    },
  };
}

/**
 * Task callbacks. A token that no longer exists (the task timed out, or the interpreter was
 * restarted and re-dispatched with a new token) is not an error for the caller: the new task
 * finds the completed state itself.
 */
export function makeSfnCallbacks(client: SFNClient): TaskCallbacks {
  const ignoreGone = (error: unknown) => {
    if (error instanceof TaskDoesNotExist || error instanceof TaskTimedOut) return;
    throw error;
  };
  return {
    succeed: (taskToken, output) =>
      client
        .send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) }))
        .then(() => undefined, ignoreGone),
    fail: (taskToken, error, cause) =>
      client.send(new SendTaskFailureCommand({ taskToken, error, cause })).then(() => undefined, ignoreGone),
  };
}

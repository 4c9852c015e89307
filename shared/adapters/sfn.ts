import {
  DescribeExecutionCommand,
  ExecutionAlreadyExists,
  ExecutionDoesNotExist,
  type SFNClient,
  SendTaskFailureCommand,
  SendTaskSuccessCommand,
  StartExecutionCommand,
  TaskDoesNotExist,
  TaskTimedOut,
} from '@aws-sdk/client-sfn';
import type { TaskCallbacks } from '../app/ports/interpreter.js';
import type { InterpreterControl } from '../app/reconciler.js';
import type { RunStarter } from '../app/runs.js';

/** The ARN of the execution named `name` of a state machine (Step Functions derives it so). */
export const executionArnFor = (stateMachineArn: string, name: string): string =>
  `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${name}`;

/**
 * Starts the run interpreter with the run id as the execution name. Starting it again is a no-op,
 * even once that execution has ended (the reconciler restarts a run under another name).
 */
export function makeSfnRunStarter(client: SFNClient, stateMachineArn: string): RunStarter {
  return {
    async start(run, carried) {
      try {
        const { executionArn } = await client.send(
          new StartExecutionCommand({
            stateMachineArn,
            name: run.runId,
            // Where Plan's results go: the first Plan finds the run there, and its result replaces it.
            input: JSON.stringify({ runId: run.runId, tenantId: run.tenantId, ...(carried && { plan: { carried } }) }),
          }),
        );
        if (!executionArn) throw new Error('StartExecution returned no execution ARN');
        return executionArn;
      } catch (error) {
        if (error instanceof ExecutionAlreadyExists) return executionArnFor(stateMachineArn, run.runId);
        throw error;
      }
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
    if (error instanceof TaskDoesNotExist || error instanceof TaskTimedOut) return false;
    throw error;
  };
  return {
    succeed: (taskToken, output) =>
      client
        .send(new SendTaskSuccessCommand({ taskToken, output: JSON.stringify(output) }))
        .then(() => true, ignoreGone),
    fail: (taskToken, error, cause) =>
      client.send(new SendTaskFailureCommand({ taskToken, error, cause })).then(
        () => undefined,
        (error: unknown) => void ignoreGone(error),
      ),
  };
}

/** What the reconciler needs of the interpreter: an execution's status, and a fresh execution for a run. */
export function makeSfnInterpreterControl(client: SFNClient, stateMachineArn: string): InterpreterControl {
  return {
    executionArnOf: (runId) => executionArnFor(stateMachineArn, runId),
    async status(executionArn) {
      try {
        const { status } = await client.send(new DescribeExecutionCommand({ executionArn }));
        return status ?? 'UNKNOWN';
      } catch (error) {
        if (error instanceof ExecutionDoesNotExist) return 'MISSING';
        throw error;
      }
    },
    async restart(run, at) {
      const { executionArn } = await client.send(
        new StartExecutionCommand({
          stateMachineArn,
          name: `${run.runId}-r${at.getTime()}`,
          input: JSON.stringify({ runId: run.runId, tenantId: run.tenantId }),
        }),
      );
      if (!executionArn) throw new Error('StartExecution returned no execution ARN');
      return executionArn;
    },
  };
}

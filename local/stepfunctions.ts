import { randomBytes } from 'node:crypto';
import {
  ExecutionAbortedError,
  ExecutionError,
  type RunOptions,
  StateMachine,
  type StateMachineDefinition,
} from 'aws-local-stepfunctions';
import { z } from 'zod';
import { AwsServiceError, type JsonService, optionalString, requireString, startJsonService } from './aws-json.js';
import {
  appendExecution,
  compactExecutions,
  type ExecutionRecord,
  type ExecutionStatus,
  executionStatus,
  readExecutions,
} from './execution-file.js';
import { ExecutionHistory } from './execution-history.js';

/** Invokes a Lambda function in-process by its name or ARN and returns its result. */
export type LambdaInvoker = (functionName: string, payload: unknown) => Promise<unknown>;

export interface LocalStepFunctionsOptions {
  readonly port: number;
  readonly stateMachineArn: string;
  /** The definition with its function placeholders already substituted. */
  readonly definition: string;
  readonly invoke: LambdaInvoker;
  /**
   * Where executions are kept across restarts, one JSON line per change (the last line of an
   * execution wins); omitted keeps them in memory only. A file of the older form, a JSON array, is
   * read too.
   */
  readonly dataFile?: string;
  readonly log?: (line: string) => void;
  /** Told of each `.waitForTaskToken` task as it starts, with its state name and payload. */
  readonly onWait?: (state: string, payload: unknown) => void;
}

interface Waiter {
  readonly executionArn: string;
  readonly settle: (outcome: { output: unknown } | { error: Error }) => void;
  readonly beat: () => void;
  /** Forgets the task without settling it: its heartbeat timer must not outlive the stack. */
  readonly drop: () => void;
}

type TaskHandlers = NonNullable<NonNullable<RunOptions['overrides']>['taskResourceLocalHandlers']>;
/** The library's JSON value type, which it does not export. */
type JsonValue = Awaited<ReturnType<TaskHandlers[string]>>;

interface Live {
  abort: () => void;
  /** The token handed out by the last `$$.Task.Token` lookup of this execution. */
  currentToken?: string;
}

/** Counters for the bench: state transitions and requests, as a deployment's metrics would count them. */
export interface StepFunctionsCounters {
  stateTransitions: number;
  requests: Record<string, number>;
}

interface TaskStateShape {
  readonly Type: string;
  readonly Resource?: string;
  readonly HeartbeatSeconds?: number;
}

/** An error with the name Step Functions gives it, so `Retry` and `Catch` match it. */
function namedError(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

const nowSeconds = () => Date.now() / 1000;

type ExecutionInput = Parameters<StateMachine['run']>[0];

/** An execution's input without the run its creation carried (`plan.carried`). */
function withoutCarried(input: ExecutionInput): ExecutionInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const { plan: _carried, ...rest } = input;
  return rest;
}

/**
 * A local Step Functions endpoint (AWS JSON 1.0) that runs the deployed definition with
 * aws-local-stepfunctions. It supplies what the library leaves out: the context object's
 * execution id and name, a real task token for each `.waitForTaskToken` task with the
 * SendTask* callbacks, `HeartbeatSeconds`, in-process Lambda invocation, and executions
 * that survive a restart (a RUNNING execution starts again from the top: the definition
 * interprets state stored in DynamoDB, so re-planning picks up where the run was).
 */
export class LocalStepFunctions {
  private readonly machine: StateMachine;
  private readonly states: Readonly<Record<string, TaskStateShape>>;
  private readonly executions = new Map<string, ExecutionRecord>();
  private readonly live = new Map<string, Live>();
  private readonly waiters = new Map<string, Waiter>();
  /** Histories of the executions run since this endpoint started (not kept across restarts). */
  private readonly histories = new Map<string, ExecutionHistory>();
  private service?: JsonService;
  private stopped = false;
  readonly counters: StepFunctionsCounters = { stateTransitions: 0, requests: {} };

  constructor(private readonly options: LocalStepFunctionsOptions) {
    const definition = JSON.parse(options.definition) as StateMachineDefinition & {
      States: Record<string, TaskStateShape>;
    };
    this.machine = new StateMachine(definition, { validationOptions: { checkArn: false } });
    this.states = definition.States;
    if (options.dataFile) {
      for (const record of readExecutions(options.dataFile, options.log))
        this.executions.set(record.executionArn, record);
      compactExecutions(options.dataFile, this.executions.values());
    }
  }

  /** Executions still running, for a caller waiting for a batch of runs to settle. */
  get running(): number {
    let count = 0;
    for (const record of this.executions.values()) if (record.status === 'RUNNING') count++;
    return count;
  }

  get endpoint(): string {
    if (!this.service) throw new Error('the local Step Functions endpoint is not started');
    return this.service.endpoint;
  }

  /** Starts listening, then resumes the executions that were running when the stack stopped. */
  async start(): Promise<string[]> {
    const ops = {
      StartExecution: (input: Record<string, unknown>) => this.startExecution(input),
      DescribeExecution: (input: Record<string, unknown>) => this.describe(requireString(input, 'executionArn')),
      StopExecution: (input: Record<string, unknown>) => this.stopExecution(input),
      ListExecutions: (input: Record<string, unknown>) => this.list(input),
      SendTaskSuccess: (input: Record<string, unknown>) => this.sendTaskSuccess(input),
      SendTaskFailure: (input: Record<string, unknown>) => this.sendTaskFailure(input),
      SendTaskHeartbeat: (input: Record<string, unknown>) => this.waiter(requireString(input, 'taskToken')).beat(),
      DescribeStateMachine: (input: Record<string, unknown>) => this.describeStateMachine(input),
      ListStateMachines: () => this.listStateMachines(),
      GetExecutionHistory: (input: Record<string, unknown>) => this.history(input),
    };
    this.service = await startJsonService({
      port: this.options.port,
      targetPrefix: 'AWSStepFunctions',
      operations: ops,
      onRequest: (op) => (this.counters.requests[op] = (this.counters.requests[op] ?? 0) + 1),
    });
    const resumed = [...this.executions.values()].filter((e) => e.status === 'RUNNING');
    for (const record of resumed) {
      this.options.log?.(`step functions: resuming execution ${record.name}`);
      this.run(record, true);
    }
    return resumed.map((r) => r.name);
  }

  /** Stops answering and abandons running executions without marking them: they resume on the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    // Waiting tasks are dropped, not failed: an aborted execution no longer listens for their outcome.
    for (const waiter of this.waiters.values()) waiter.drop();
    this.waiters.clear();
    for (const live of this.live.values()) live.abort();
    this.live.clear();
    await this.service?.close();
  }

  private stateMachineName(): string {
    return this.options.stateMachineArn.split(':').at(-1) ?? 'state-machine';
  }

  private startExecution(input: Record<string, unknown>) {
    const stateMachineArn = requireString(input, 'stateMachineArn');
    if (stateMachineArn !== this.options.stateMachineArn)
      throw new AwsServiceError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${stateMachineArn}'`);
    const name = optionalString(input, 'name') ?? crypto.randomUUID();
    if (!/^[A-Za-z0-9_-]{1,80}$/.test(name)) throw new AwsServiceError('InvalidName', `Invalid Name: '${name}'`);
    const body = optionalString(input, 'input') ?? '{}';
    try {
      JSON.parse(body);
    } catch {
      throw new AwsServiceError('InvalidExecutionInput', 'Invalid State Machine Execution Input');
    }
    const executionArn = this.options.stateMachineArn.replace(':stateMachine:', ':execution:') + `:${name}`;
    const existing = this.executions.get(executionArn);
    if (existing) {
      // As in AWS: the same name and input while running is idempotent; anything else is a conflict.
      if (existing.status === 'RUNNING' && existing.input === body)
        return { executionArn, startDate: existing.startDate };
      throw new AwsServiceError('ExecutionAlreadyExists', `Execution Already Exists: '${executionArn}'`);
    }
    const record: ExecutionRecord = { executionArn, name, status: 'RUNNING', input: body, startDate: nowSeconds() };
    this.executions.set(executionArn, record);
    this.persist(record);
    this.run(record);
    return { executionArn, startDate: record.startDate };
  }

  /**
   * Runs an execution from the top. One resumed after a restart starts without the run its
   * creation carried (`plan.carried`): that describes the run when it was created, and a Plan that
   * starts again decides on the run as stored, as it does in an execution the reconciler restarts.
   */
  private run(record: ExecutionRecord, resumed = false): void {
    const live: Live = { abort: () => undefined };
    const context = {
      Execution: { Id: record.executionArn, Name: record.name, RoleArn: 'arn:aws:iam::000000000000:role/local' },
      StateMachine: { Id: this.options.stateMachineArn, Name: this.stateMachineName() },
      Task: {
        // Each lookup issues a fresh token, as each attempt of a waiting task gets its own in AWS.
        get Token(): string {
          const token = randomBytes(48).toString('base64url');
          live.currentToken = token;
          return token;
        },
      },
    };
    const handlers: TaskHandlers = Object.fromEntries(
      Object.entries(this.states)
        .filter(([, state]) => state.Type === 'Task')
        .map(([stateName, state]) => [
          stateName,
          (taskInput: unknown) => this.task(record, live, stateName, state, taskInput),
        ]),
    );
    const stored = JSON.parse(record.input) as ExecutionInput;
    const execution = this.machine.run(resumed ? withoutCarried(stored) : stored, {
      overrides: { taskResourceLocalHandlers: handlers },
      context,
    });
    live.abort = execution.abort;
    this.live.set(record.executionArn, live);
    const history = new ExecutionHistory();
    this.histories.set(record.executionArn, history);
    const drained = (async () => {
      for await (const event of execution.eventLogs) {
        if (event.type === 'StateEntered') this.counters.stateTransitions++;
        history.record(event);
      }
    })().catch(() => undefined);
    // The history holds the last event before DescribeExecution reports the end.
    const settled = execution.result.then(
      async (output) => {
        await Promise.race([drained, new Promise((r) => setTimeout(r, 500))]);
        return output;
      },
      async (error: unknown) => {
        await Promise.race([drained, new Promise((r) => setTimeout(r, 500))]);
        throw error;
      },
    );
    settled.then(
      (output) => this.finish(record, { status: 'SUCCEEDED', output: JSON.stringify(output ?? null) }),
      (error: unknown) => {
        if (error instanceof ExecutionAbortedError) return; // StopExecution already recorded it, or we are stopping.
        if (error instanceof ExecutionError) {
          const cause = (error as { cause?: unknown }).cause;
          const detail = cause instanceof Error ? cause : error;
          return this.finish(record, { status: 'FAILED', error: detail.name, cause: detail.message });
        }
        const status: ExecutionStatus = (error as Error).name === 'ExecutionTimeoutError' ? 'TIMED_OUT' : 'FAILED';
        this.finish(record, { status, error: (error as Error).name, cause: (error as Error).message });
      },
    );
  }

  private finish(record: ExecutionRecord, outcome: Partial<ExecutionRecord> & { status: ExecutionStatus }): void {
    this.live.delete(record.executionArn);
    if (this.stopped || record.status !== 'RUNNING') return;
    Object.assign(record, outcome, { stopDate: nowSeconds() });
    this.persist(record);
    const why = record.error ? ` (${record.error}${record.cause ? `: ${record.cause}` : ''})` : '';
    this.options.log?.(`step functions: execution ${record.name} ${record.status}${why}`);
  }

  /** One Task state: invoke the Lambda function; for `.waitForTaskToken`, then wait for the callback. */
  private async task(
    record: ExecutionRecord,
    live: Live,
    stateName: string,
    state: TaskStateShape,
    taskInput: unknown,
  ): Promise<JsonValue> {
    const parameters = z.object({ FunctionName: z.string(), Payload: z.unknown() }).parse(taskInput);
    const resource = state.Resource ?? '';
    if (!resource.endsWith('.waitForTaskToken')) {
      const payload = await this.invoke(parameters.FunctionName, parameters.Payload);
      return { Payload: (payload ?? null) as JsonValue, StatusCode: 200, ExecutedVersion: '$LATEST' };
    }
    const token = live.currentToken;
    if (!token) throw namedError('States.Runtime', 'a .waitForTaskToken task must pass $$.Task.Token');
    live.currentToken = undefined;
    const { promise, resolve, reject } = Promise.withResolvers<JsonValue>();
    let heartbeat: NodeJS.Timeout | undefined;
    const beat = () => {
      if (state.HeartbeatSeconds === undefined) return;
      clearTimeout(heartbeat);
      heartbeat = setTimeout(() => {
        this.waiters.delete(token);
        reject(namedError('States.HeartbeatTimeout', `no heartbeat for ${state.HeartbeatSeconds} s`));
      }, state.HeartbeatSeconds * 1000);
    };
    this.waiters.set(token, {
      executionArn: record.executionArn,
      beat,
      settle: (outcome) => ('output' in outcome ? resolve(outcome.output as JsonValue) : reject(outcome.error)),
      drop: () => clearTimeout(heartbeat),
    });
    beat();
    this.options.onWait?.(stateName, parameters.Payload);
    try {
      // Registered before the invocation: a callback may arrive before the function returns.
      await this.invoke(parameters.FunctionName, parameters.Payload);
      return await promise;
    } finally {
      clearTimeout(heartbeat);
      this.waiters.delete(token);
    }
  }

  private async invoke(functionName: string, payload: unknown): Promise<unknown> {
    try {
      return await this.options.invoke(functionName, payload);
    } catch (error) {
      // lambda:invoke reports a function error under the error's own name, as AWS does.
      const failure = error as Error;
      throw namedError(
        failure.name || 'Error',
        JSON.stringify({ errorType: failure.name, errorMessage: failure.message }),
      );
    }
  }

  private waiter(token: string): Waiter {
    const waiter = this.waiters.get(token);
    if (!waiter) throw new AwsServiceError('TaskDoesNotExist', 'Task Does Not Exist');
    return waiter;
  }

  private sendTaskSuccess(input: Record<string, unknown>) {
    const waiter = this.waiter(requireString(input, 'taskToken'));
    let output: unknown;
    try {
      output = JSON.parse(requireString(input, 'output'));
    } catch {
      throw new AwsServiceError('InvalidOutput', 'Invalid Output');
    }
    waiter.settle({ output });
    return {};
  }

  private sendTaskFailure(input: Record<string, unknown>) {
    const waiter = this.waiter(requireString(input, 'taskToken'));
    const error = optionalString(input, 'error') ?? 'States.TaskFailed';
    waiter.settle({ error: namedError(error, optionalString(input, 'cause') ?? '') });
    return {};
  }

  private record(executionArn: string): ExecutionRecord {
    const record = this.executions.get(executionArn);
    if (!record) throw new AwsServiceError('ExecutionDoesNotExist', `Execution Does Not Exist: '${executionArn}'`);
    return record;
  }

  private describe(executionArn: string) {
    const record = this.record(executionArn);
    return { ...record, stateMachineArn: this.options.stateMachineArn };
  }

  private stopExecution(input: Record<string, unknown>) {
    const record = this.record(requireString(input, 'executionArn'));
    if (record.status === 'RUNNING') {
      const live = this.live.get(record.executionArn);
      Object.assign(record, {
        status: 'ABORTED',
        stopDate: nowSeconds(),
        error: optionalString(input, 'error'),
        cause: optionalString(input, 'cause'),
      });
      this.persist(record);
      for (const [token, waiter] of this.waiters)
        if (waiter.executionArn === record.executionArn) this.waiters.delete(token);
      live?.abort();
      this.options.log?.(`step functions: execution ${record.name} ABORTED`);
    }
    return { stopDate: record.stopDate };
  }

  private list(input: Record<string, unknown>) {
    const status = input.statusFilter === undefined ? undefined : executionStatus.parse(input.statusFilter);
    const max = typeof input.maxResults === 'number' && input.maxResults > 0 ? input.maxResults : 100;
    const offset = typeof input.nextToken === 'string' ? Number(input.nextToken) : 0;
    const all = [...this.executions.values()]
      .filter((e) => status === undefined || e.status === status)
      .sort((a, b) => b.startDate - a.startDate);
    const page = all.slice(offset, offset + max);
    return {
      executions: page.map((e) => ({
        executionArn: e.executionArn,
        stateMachineArn: this.options.stateMachineArn,
        name: e.name,
        status: e.status,
        startDate: e.startDate,
        stopDate: e.stopDate,
      })),
      nextToken: offset + max < all.length ? String(offset + max) : undefined,
    };
  }

  private listStateMachines() {
    return {
      stateMachines: [
        {
          stateMachineArn: this.options.stateMachineArn,
          name: this.stateMachineName(),
          type: 'STANDARD',
          creationDate: 0,
        },
      ],
    };
  }

  private history(input: Record<string, unknown>) {
    const record = this.record(requireString(input, 'executionArn'));
    const history = this.histories.get(record.executionArn) ?? new ExecutionHistory();
    return history.page({
      reverseOrder: input.reverseOrder === true,
      maxResults: typeof input.maxResults === 'number' ? input.maxResults : undefined,
      nextToken: optionalString(input, 'nextToken'),
      includeExecutionData: input.includeExecutionData !== false,
    });
  }

  private describeStateMachine(input: Record<string, unknown>) {
    const arn = requireString(input, 'stateMachineArn');
    if (arn !== this.options.stateMachineArn)
      throw new AwsServiceError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
    return {
      stateMachineArn: arn,
      name: this.stateMachineName(),
      status: 'ACTIVE',
      definition: this.options.definition,
      roleArn: 'arn:aws:iam::000000000000:role/local',
      type: 'STANDARD',
      creationDate: 0,
    };
  }

  private persist(record: ExecutionRecord): void {
    const file = this.options.dataFile;
    if (!file) return;
    try {
      appendExecution(file, record);
    } catch (error) {
      // Kept in memory still; only a restart would not see this change.
      this.options.log?.(`step functions: execution ${record.name} not saved: ${(error as Error).message}`);
    }
  }
}

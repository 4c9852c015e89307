import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { DefinitionBody, LogLevel, StateMachine, StateMachineType } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import {
  DEFINITION_FUNCTIONS,
  type DefinitionPlaceholder,
  loadRunInterpreterDefinition,
} from '../../shared/workflow/definition.js';
import { CapstanFunction } from './capstan-function.js';
import { grantNodeQueues, grantRunState, queueEnvironment, type RunResources } from './run-resources.js';

export interface RunInterpreterProps {
  readonly resources: RunResources;
  /** Physical name of the state machine; `resources.interpreter` addresses it by this name. */
  readonly stateMachineName: string;
  /** The deployment's policy document as JSON; the built-in default when empty. @default '' */
  readonly policy?: string;
  /** Slack-compatible webhook Plan posts approval requests to; none when empty. @default '' */
  readonly notifyWebhookUrl?: string;
}

/**
 * The run interpreter: the one generic state machine (loaded from the file the local stack
 * runs too) and its workflow functions, each granted what its task does.
 */
export class RunInterpreter extends Construct {
  public readonly stateMachine: StateMachine;
  /** The workflow functions by their placeholder in the definition. */
  public readonly workflowFunctions: Readonly<Record<DefinitionPlaceholder, NodejsFunction>>;
  /** The workflow functions by name (`plan`, `dispatch`, ...). */
  public readonly functions: ReadonlyMap<string, NodejsFunction>;

  constructor(scope: Construct, id: string, props: RunInterpreterProps) {
    super(scope, id);
    if (!/^[A-Za-z0-9_-]{1,80}$/.test(props.stateMachineName)) {
      throw new Error(`RunInterpreter stateMachineName must be 1-80 letters, digits, '-' or '_'`);
    }
    const { resources } = props;
    const functions = new Map<string, NodejsFunction>();
    const entries = Object.entries(DEFINITION_FUNCTIONS) as Array<[DefinitionPlaceholder, string]>;
    const byPlaceholder = Object.fromEntries(
      entries.map(([placeholder, name]) => {
        const made = new CapstanFunction(this, `Fn-${name}`, {
          entry: `functions/workflow/${name}.ts`,
          environment: { ...resources.environment, ...queueEnvironment(resources) },
          logKey: resources.key,
        }).function;
        functions.set(name, made);
        return [placeholder, made];
      }),
    ) as Record<DefinitionPlaceholder, NodejsFunction>;
    this.workflowFunctions = byPlaceholder;
    this.functions = functions;

    const logs = new LogGroup(this, 'RunInterpreterLogs', {
      retention: RetentionDays.ONE_MONTH,
      encryptionKey: resources.key,
    });
    this.stateMachine = new StateMachine(this, 'RunInterpreter', {
      stateMachineName: props.stateMachineName,
      stateMachineType: StateMachineType.STANDARD,
      definitionBody: DefinitionBody.fromString(loadRunInterpreterDefinition()),
      definitionSubstitutions: Object.fromEntries(entries.map(([p]) => [p, byPlaceholder[p].functionArn])),
      tracingEnabled: true,
      logs: { destination: logs, level: LogLevel.ALL, includeExecutionData: false },
    });
    for (const f of functions.values()) f.grantInvoke(this.stateMachine);

    for (const f of functions.values()) {
      grantRunState(resources, f, 'read-write');
      resources.eventBus.grantPutEventsTo(f);
    }
    // Plan decides every step through the deployment's policy and tells people about gates.
    const plan = byPlaceholder.PlanFunctionArn;
    plan.addEnvironment('CAPSTAN_POLICY', props.policy ?? '');
    if (props.notifyWebhookUrl) plan.addEnvironment('CAPSTAN_NOTIFY_WEBHOOK_URL', props.notifyWebhookUrl);
    // Dispatch sends commands and resumes its own execution when nothing is left to wait for.
    const dispatch = byPlaceholder.DispatchFunctionArn;
    resources.interpreter.grantTaskResponse(dispatch);
    for (const pq of resources.queues.values()) for (const queue of pq.stepQueues) queue.grantSendMessages(dispatch);
    grantNodeQueues(resources, dispatch, 'send');
  }
}

import { Stack } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { Grant, type IGrantable } from 'aws-cdk-lib/aws-iam';
import type { IEventBus } from 'aws-cdk-lib/aws-events';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { IStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import type { SandboxProfileName } from '../../shared/domain/sandbox-profiles.js';
import type { ProfileQueue } from './profile-queue.js';
import { nodeQueuePrefix } from '../../shared/resources/queues.js';

/** The resources the compute constructs act on, and the names every component reads. */
export interface RunResources {
  readonly state: ITable;
  readonly events: ITable;
  readonly connections: ITable;
  readonly evidenceBucket: IBucket;
  /** The run interpreter addressed by its name, so a grant does not wait for the state machine. */
  readonly interpreter: IStateMachine;
  readonly queues: ReadonlyMap<SandboxProfileName, ProfileQueue>;
  /** Encrypts log groups and queues. */
  readonly key: IKey;
  /** The asymmetric key (ECC_NIST_P256, SIGN_VERIFY) that signs evidence manifests. */
  readonly evidenceKey: IKey;
  /** Capstan's event bus; every function but the authorizer is told its name. */
  readonly eventBus: IEventBus;
  /** Resource names every component reads through its config module (never secrets). */
  readonly environment: Readonly<Record<string, string>>;
}

/** How much of the run state and event log a function may touch. */
export type RunStateAccess = 'read' | 'read-write';

/** Grants `fn` the run state and the event log, and names the event bus in its environment. */
export function grantRunState(resources: RunResources, fn: NodejsFunction, access: RunStateAccess): void {
  if (access === 'read') {
    resources.state.grantReadData(fn);
    resources.events.grantReadData(fn);
  } else {
    resources.state.grantReadWriteData(fn);
    resources.events.grantReadWriteData(fn);
  }
  fn.addEnvironment('CAPSTAN_EVENT_BUS', resources.eventBus.eventBusName);
}

/** `CAPSTAN_QUEUE_URL_<PROFILE>` for every step queue, for the functions that address them by profile. */
export function queueEnvironment(resources: RunResources): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [profile, pq] of resources.queues)
    environment[`CAPSTAN_QUEUE_URL_${profile.replaceAll('-', '_').toUpperCase()}`] = pq.queue.queueUrl;
  return environment;
}

/**
 * Grants what admitting a run takes besides the run state: starting its interpreter, and reading
 * the depth of the step queues (backpressure holds runs while their profile's queue is past its bound).
 */
export function grantAdmitRuns(resources: RunResources, fn: NodejsFunction): void {
  resources.interpreter.grantStartExecution(fn);
  for (const pq of resources.queues.values())
    for (const queue of pq.stepQueues) queue.grant(fn, 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes');
}

/**
 * Who does what with agent node queues (`<prefix>-node-*`), which workers create at run time so
 * CDK cannot name them: `send` for whoever dispatches commands, `own` for the workers (create the
 * node's queue, receive from it and delete what they handled).
 */
export type NodeQueueAccess = 'send' | 'own';

const NODE_QUEUE_ACTIONS: Record<NodeQueueAccess, string[]> = {
  send: ['sqs:SendMessage', 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes'],
  // Workers also send: recording a result may start a pipeline target's next step.
  own: [
    'sqs:SendMessage',
    'sqs:CreateQueue',
    'sqs:TagQueue',
    'sqs:GetQueueUrl',
    'sqs:GetQueueAttributes',
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:ChangeMessageVisibility',
  ],
};

/** The ARN pattern of every agent node queue of this deployment. */
export function nodeQueueArns(resources: RunResources, scope: Stack): string {
  const prefix = resources.environment.CAPSTAN_PREFIX;
  if (prefix === undefined) throw new Error('RunResources.environment must name CAPSTAN_PREFIX');
  return scope.formatArn({ service: 'sqs', resource: `${nodeQueuePrefix(prefix)}*` });
}

/** Grants `grantee` its access to the agent node queues (see {@link NodeQueueAccess}). */
export function grantNodeQueues(resources: RunResources, grantee: IGrantable, access: NodeQueueAccess): void {
  Grant.addToPrincipal({
    grantee,
    actions: NODE_QUEUE_ACTIONS[access],
    resourceArns: [nodeQueueArns(resources, Stack.of(resources.state))],
  });
}

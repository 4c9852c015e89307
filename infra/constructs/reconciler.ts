import { Duration } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantNodeQueues, grantRunState, type RunResources } from './run-resources.js';

export interface ReconcilerProps {
  readonly resources: RunResources;
  /** @default Duration.minutes(1) */
  readonly interval?: Duration;
  /** Slack-compatible webhook escalations are posted to; none when empty. @default '' */
  readonly notifyWebhookUrl?: string;
}

/**
 * The reconciler on its schedule: marks silent workers dead, expires their leases,
 * re-dispatches recovered step executions, resumes executions and repairs drift.
 */
export class Reconciler extends Construct {
  public readonly function: NodejsFunction;
  public readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: ReconcilerProps) {
    super(scope, id);
    const interval = props.interval ?? Duration.minutes(1);
    if (interval.toSeconds() < 60) throw new Error('Reconciler interval must be at least one minute');
    const { resources } = props;
    this.function = new CapstanFunction(this, 'Fn-reconciler', {
      entry: 'functions/reconciler.ts',
      environment: resources.environment,
      logKey: resources.key,
      timeout: Duration.minutes(2),
    }).function;
    this.schedule = new Rule(this, 'ReconcileSchedule', {
      description: 'Marks silent workers dead, expires their leases and repairs drift',
      schedule: Schedule.rate(interval),
      targets: [new LambdaFunction(this.function)],
    });

    grantReconcile(resources, this.function, props.notifyWebhookUrl);
  }
}

/** What a sweep needs: the run state, the interpreter, re-dispatch, escalations. The schedule and an admin's forced sweep share it. */
export function grantReconcile(resources: RunResources, fn: NodejsFunction, notifyWebhookUrl?: string): void {
  grantRunState(resources, fn, 'read-write');
  resources.eventBus.grantPutEventsTo(fn);
  if (notifyWebhookUrl) fn.addEnvironment('CAPSTAN_NOTIFY_WEBHOOK_URL', notifyWebhookUrl);
  resources.interpreter.grantTaskResponse(fn);
  resources.interpreter.grantRead(fn);
  resources.interpreter.grantStartExecution(fn);
  // One statement for every profile's queues (a statement per queue and action would overflow the
  // role's policy): the sweep sends lost commands again and publishes each profile's queue depth.
  const queues = [...resources.queues.values()].flatMap((pq) => pq.stepQueues);
  fn.addToRolePolicy(
    new PolicyStatement({
      actions: ['sqs:SendMessage', 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes'],
      resources: queues.map((q) => q.queueArn),
    }),
  );
  // Sending to an encrypted queue encrypts with its key.
  resources.key.grant(fn, 'kms:Encrypt', 'kms:GenerateDataKey*', 'kms:Decrypt');
  grantNodeQueues(resources, fn, 'send');
  resources.evidenceBucket.grantReadWrite(fn);
  // The sweep publishes the open WebSocket sessions (a count-only scan).
  resources.connections.grantReadData(fn);
}

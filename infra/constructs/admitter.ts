import { Duration } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { StartingPosition } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantAdmitRuns, grantRunState, type RunResources } from './run-resources.js';

export interface AdmitterProps {
  readonly resources: RunResources;
  /** How often held runs are looked at again (windows, throttles, breaker cooldowns). @default Duration.minutes(1) */
  readonly interval?: Duration;
  /** Where incidents (a breaker opening, a failed run of an escalating runbook) are posted. */
  readonly notifyWebhookUrl?: string;
}

/**
 * The backlog admitter: a consumer of the event log's stream that admits held runs as soon as a run
 * ends and frees capacity, and a schedule for what only time makes eligible.
 */
export class Admitter extends Construct {
  public readonly function: NodejsFunction;
  public readonly schedule: Rule;
  public readonly failures: Queue;

  constructor(scope: Construct, id: string, props: AdmitterProps) {
    super(scope, id);
    const interval = props.interval ?? Duration.minutes(1);
    if (interval.toSeconds() < 60) throw new Error('Admitter interval must be at least one minute');
    const { resources } = props;
    this.function = new CapstanFunction(this, 'Fn-admitter', {
      entry: 'functions/admitter.ts',
      environment: resources.environment,
      logKey: resources.key,
      timeout: Duration.seconds(60),
    }).function;
    this.failures = new Queue(this, 'AdmitFailures', {
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: resources.key,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.function.addEventSource(
      new DynamoEventSource(resources.events, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: 100,
        retryAttempts: 3,
        onFailure: new SqsDlq(this.failures),
      }),
    );
    this.schedule = new Rule(this, 'AdmitSchedule', {
      description: 'Admits held runs that time made eligible',
      schedule: Schedule.rate(interval),
      targets: [new LambdaFunction(this.function)],
    });
    grantRunState(resources, this.function, 'read-write');
    grantAdmitRuns(resources, this.function);
    // Incidents go out on the bus (`incident.raised`) and to the notify webhook.
    resources.eventBus.grantPutEventsTo(this.function);
    if (props.notifyWebhookUrl) this.function.addEnvironment('CAPSTAN_NOTIFY_WEBHOOK_URL', props.notifyWebhookUrl);
  }
}

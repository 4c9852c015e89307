import { Duration } from 'aws-cdk-lib';
import { StartingPosition } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantRunState, type RunResources } from './run-resources.js';

export interface LifecyclePublisherProps {
  readonly resources: RunResources;
}

/**
 * Run lifecycle events out on the bus: a second consumer of the event log's stream, beside the
 * broadcaster, so publication never sits in a run's path. A refused batch is retried from the
 * first unsent record; what still fails after the retries is kept in `failures`.
 */
export class LifecyclePublisher extends Construct {
  public readonly function: NodejsFunction;
  public readonly failures: Queue;

  constructor(scope: Construct, id: string, props: LifecyclePublisherProps) {
    super(scope, id);
    const { resources } = props;
    this.function = new CapstanFunction(this, 'Fn-lifecycle-publisher', {
      entry: 'functions/lifecycle-publisher.ts',
      environment: resources.environment,
      logKey: resources.key,
      timeout: Duration.seconds(60),
    }).function;
    this.failures = new Queue(this, 'PublishFailures', {
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: resources.key,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.function.addEventSource(
      new DynamoEventSource(resources.events, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: 100,
        retryAttempts: 10,
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(this.failures),
      }),
    );
    grantRunState(resources, this.function, 'read');
    resources.eventBus.grantPutEventsTo(this.function);
  }
}

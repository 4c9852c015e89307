import { Duration } from 'aws-cdk-lib';
import { Match, Rule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Arn, ArnFormat, Stack } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantAdmitRuns, grantRunState, type RunResources } from './run-resources.js';

export interface TicketIngestProps {
  /** Ticket events arrive on `resources.eventBus`. */
  readonly resources: RunResources;
  /** The routing document (JSON), checked at synth. @default '' (no rule matches) */
  readonly routesDocument?: string;
}

/** The routing document and the signing keys a function that ingests tickets reads. */
export function grantIngestTickets(fn: NodejsFunction, routesDocument: string, secretPrefix: string): void {
  if (routesDocument !== '') fn.addEnvironment('CAPSTAN_ROUTES', routesDocument);
  fn.addToRolePolicy(
    new PolicyStatement({
      actions: ['secretsmanager:GetSecretValue'],
      resources: [
        Arn.format(
          {
            service: 'secretsmanager',
            resource: 'secret',
            resourceName: `${secretPrefix}/webhooks/*`,
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          },
          Stack.of(fn),
        ),
      ],
    }),
  );
}

/**
 * `Ticket` events on Capstan's bus become runs. The rule retries delivery and keeps what it could
 * not deliver in the dead-letter queue; the function's own failures (after Lambda's two retries of
 * an asynchronous invocation) land in the same queue, so no ticket event is lost.
 */
export class TicketIngest extends Construct {
  public readonly function: NodejsFunction;
  public readonly rule: Rule;
  public readonly deadLetterQueue: Queue;

  constructor(scope: Construct, id: string, props: TicketIngestProps) {
    super(scope, id);
    const { resources } = props;
    this.deadLetterQueue = new Queue(this, 'Dlq', {
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: resources.key,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.function = new CapstanFunction(this, 'Fn-ticket-ingest', {
      entry: 'functions/ticket-ingest.ts',
      environment: {
        ...resources.environment,
        ...(props.routesDocument ? { CAPSTAN_ROUTES: props.routesDocument } : {}),
      },
      logKey: resources.key,
      deadLetterQueue: this.deadLetterQueue,
    }).function;
    this.rule = new Rule(this, 'TicketEvents', {
      eventBus: resources.eventBus,
      description: 'Ticket events that start runs (docs/intake.md)',
      // Capstan's own lifecycle events never come back in.
      eventPattern: { source: Match.anythingBut('capstan'), detailType: ['Ticket'] },
      targets: [
        new LambdaFunction(this.function, {
          deadLetterQueue: this.deadLetterQueue,
          retryAttempts: 8,
          maxEventAge: Duration.hours(2),
        }),
      ],
    });
    grantRunState(resources, this.function, 'read-write');
    grantAdmitRuns(resources, this.function);
  }
}

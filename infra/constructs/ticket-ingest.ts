import { Rule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantRunState, type RunResources } from './run-resources.js';

export interface TicketIngestProps {
  /** Ticket webhooks arrive on `resources.eventBus`. */
  readonly resources: RunResources;
}

/** Ticket events on Capstan's bus that start runs. */
export class TicketIngest extends Construct {
  public readonly function: NodejsFunction;
  public readonly rule: Rule;

  constructor(scope: Construct, id: string, props: TicketIngestProps) {
    super(scope, id);
    const { resources } = props;
    this.function = new CapstanFunction(this, 'Fn-ticket-ingest', {
      entry: 'functions/ticket-ingest.ts',
      environment: resources.environment,
      logKey: resources.key,
    }).function;
    this.rule = new Rule(this, 'TicketEvents', {
      eventBus: resources.eventBus,
      description: 'Ticket webhooks that start runs',
      eventPattern: { source: ['capstan.tickets'], detailType: ['Ticket Opened', 'Ticket Updated'] },
      targets: [new LambdaFunction(this.function)],
    });
    grantRunState(resources, this.function, 'read-write');
    resources.interpreter.grantStartExecution(this.function);
  }
}

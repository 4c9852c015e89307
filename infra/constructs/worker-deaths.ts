import { Duration } from 'aws-cdk-lib';
import type { ICluster } from 'aws-cdk-lib/aws-ecs';
import { Rule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantRunState, type RunResources } from './run-resources.js';

export interface WorkerDeathsProps {
  readonly resources: RunResources;
  /** The cluster the worker services run in; only its tasks' stops are reacted to. */
  readonly cluster: ICluster;
}

/**
 * Reacts to a worker's death as ECS reports it: a task of the workers' cluster that stopped
 * invokes `worker-stopped`, which declares its worker dead and recovers the step executions it
 * held at once, instead of after their leases lapse and a reconciler sweep finds them.
 */
export class WorkerDeaths extends Construct {
  public readonly function: NodejsFunction;
  public readonly rule: Rule;

  constructor(scope: Construct, id: string, props: WorkerDeathsProps) {
    super(scope, id);
    const { resources } = props;
    this.function = new CapstanFunction(this, 'Fn-worker-stopped', {
      entry: 'functions/worker-stopped.ts',
      environment: resources.environment,
      logKey: resources.key,
      timeout: Duration.seconds(60),
    }).function;
    this.rule = new Rule(this, 'TaskStopped', {
      description: 'A worker task stopped: recover the step executions it held at once',
      eventPattern: {
        source: ['aws.ecs'],
        detailType: ['ECS Task State Change'],
        detail: { clusterArn: [props.cluster.clusterArn], lastStatus: ['STOPPED'] },
      },
      targets: [new LambdaFunction(this.function, { retryAttempts: 4 })],
    });
    // Ends lost executions (run state and its events) and resumes the interpreter task waiting on them.
    grantRunState(resources, this.function, 'read-write');
    resources.interpreter.grantTaskResponse(this.function);
  }
}

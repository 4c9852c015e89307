import { Duration } from 'aws-cdk-lib';
import { type CfnStage, WebSocketApi, WebSocketStage } from 'aws-cdk-lib/aws-apigatewayv2';
import { WebSocketLambdaAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { WebSocketLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { type IFunction, StartingPosition } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { CapstanFunction } from './capstan-function.js';
import { grantRunState, type RunResources } from './run-resources.js';

export interface LiveStreamProps {
  /** `events` must carry its stream ARN: the broadcaster reads the event log's stream. */
  readonly resources: RunResources;
  /** Name of the WebSocket API. */
  readonly apiName: string;
  /** Checks the JWT a client passes as `?token=` at `$connect`. */
  readonly authorizer: IFunction;
  /** @default 100 */
  readonly batchSize?: number;
}

/**
 * The live stream: a WebSocket API where clients subscribe to a run's events, and the
 * broadcaster that reads the event log's stream and posts each event to the subscribers.
 */
export class LiveStream extends Construct {
  public readonly webSocketApi: WebSocketApi;
  public readonly stage: WebSocketStage;
  public readonly broadcaster: NodejsFunction;
  /** Where event-stream batches go after the broadcaster gave up on them. */
  public readonly failures: Queue;
  /** `ws-connect`, `ws-disconnect`, `ws-default` and `broadcaster`. */
  public readonly functions: ReadonlyMap<string, NodejsFunction>;

  constructor(scope: Construct, id: string, props: LiveStreamProps) {
    super(scope, id);
    const { resources } = props;
    if (resources.events.tableStreamArn === undefined) {
      throw new Error('LiveStream needs the events table with its stream ARN');
    }
    const functions = new Map<string, NodejsFunction>();
    const fn = (name: string, entry: string, timeout?: Duration) => {
      const made = new CapstanFunction(this, `Fn-${name}`, {
        entry,
        environment: resources.environment,
        logKey: resources.key,
        timeout,
      }).function;
      functions.set(name, made);
      return made;
    };
    const connect = fn('ws-connect', 'functions/ws/connect.ts');
    const disconnect = fn('ws-disconnect', 'functions/ws/disconnect.ts');
    const onMessage = fn('ws-default', 'functions/ws/default.ts');

    this.webSocketApi = new WebSocketApi(this, 'WebSocketApi', {
      apiName: props.apiName,
      connectRouteOptions: {
        integration: new WebSocketLambdaIntegration('ConnectIntegration', connect),
        authorizer: new WebSocketLambdaAuthorizer('Authorizer', props.authorizer, {
          identitySource: ['route.request.querystring.token'],
        }),
      },
      disconnectRouteOptions: { integration: new WebSocketLambdaIntegration('DisconnectIntegration', disconnect) },
      defaultRouteOptions: { integration: new WebSocketLambdaIntegration('DefaultIntegration', onMessage) },
    });
    this.stage = new WebSocketStage(this, 'WebSocketStage', {
      webSocketApi: this.webSocketApi,
      stageName: 'prod',
      autoDeploy: true,
    });
    const accessLogs = new LogGroup(this, 'WebSocketAccessLogs', {
      retention: RetentionDays.ONE_MONTH,
      encryptionKey: resources.key,
    });
    // The L2 stage has no access-log setting yet.
    (this.stage.node.defaultChild as CfnStage).accessLogSettings = {
      destinationArn: accessLogs.logGroupArn,
      format: JSON.stringify({
        requestId: '$context.requestId',
        routeKey: '$context.routeKey',
        status: '$context.status',
        connectionId: '$context.connectionId',
        eventType: '$context.eventType',
        error: '$context.error.message',
      }),
    };

    this.broadcaster = fn('broadcaster', 'functions/broadcaster.ts', Duration.seconds(60));
    this.failures = new Queue(this, 'BroadcastFailures', {
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: resources.key,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    this.broadcaster.addEventSource(
      new DynamoEventSource(resources.events, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: props.batchSize ?? 100,
        bisectBatchOnError: true,
        retryAttempts: 5,
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(this.failures),
      }),
    );
    for (const f of [onMessage, this.broadcaster]) {
      f.addEnvironment('CAPSTAN_WS_ENDPOINT', this.stage.callbackUrl);
      this.webSocketApi.grantManageConnections(f);
    }
    // The stream's functions only read the run state and the event log.
    for (const f of functions.values()) grantRunState(resources, f, 'read');
    for (const f of functions.values()) resources.connections.grantReadWriteData(f);
    this.functions = functions;
  }
}

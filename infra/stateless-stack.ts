import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { RestApi as ApiGatewayRestApi } from 'aws-cdk-lib/aws-apigateway';
import type { WebSocketApi } from 'aws-cdk-lib/aws-apigatewayv2';
import { Table } from 'aws-cdk-lib/aws-dynamodb';
import type { Cluster } from 'aws-cdk-lib/aws-ecs';
import { EventBus } from 'aws-cdk-lib/aws-events';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { StateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { ensureConsoleBuilt } from '../console/build.js';
import { ROUTES } from '../shared/resources/routes.js';
import type { TableKey } from '../shared/resources/tables.js';
import { type DeploymentConfig, policyText, routesText } from './config.js';
import { Admitter } from './constructs/admitter.js';
import { Console } from './constructs/console.js';
import { LifecyclePublisher } from './constructs/lifecycle-publisher.js';
import { LiveStream } from './constructs/live-stream.js';
import { Operations } from './constructs/operations.js';
import { Reconciler } from './constructs/reconciler.js';
import { RestApi } from './constructs/rest-api.js';
import type { RunResources } from './constructs/run-resources.js';
import { RunInterpreter } from './constructs/run-interpreter.js';
import { ServiceMetrics } from './constructs/service-metrics.js';
import { TicketIngest } from './constructs/ticket-ingest.js';
import type { WorkerService } from './constructs/worker-service.js';
import { Workers } from './constructs/workers.js';
import { physicalNames } from './names.js';
import type { StatefulStack } from './stateful-stack.js';

export interface StatelessStackProps extends StackProps {
  readonly config: DeploymentConfig;
  readonly stateful: StatefulStack;
}

/** The constructs that only group the stack's parts: their resources keep top-level logical ids. */

/** What computes: the run interpreter, the APIs, the reconciler, ticket intake, the workers, alarms. */
export class StatelessStack extends Stack {
  public readonly restApi: ApiGatewayRestApi;
  public readonly console: Console;
  public readonly webSocketApi: WebSocketApi;
  public readonly stateMachine: StateMachine;
  public readonly cluster: Cluster;
  public readonly workers: ReadonlyMap<string, WorkerService>;
  public readonly functions: ReadonlyMap<string, NodejsFunction>;

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { config, stateful } = props;
    // Checked before anything is built: a bad routing document fails synth with its file name.
    const routesDocument = routesText(config);
    const names = physicalNames(config.prefix, this);
    // The stateful resources, addressed by name: grants carry plain ARNs, no stack export.
    const byName = (key: TableKey, streamArn?: string) =>
      Table.fromTableAttributes(this, `Table-${key}`, {
        tableName: names.tables[key],
        encryptionKey: stateful.key,
        tableStreamArn: streamArn,
      });
    const state = byName('state');
    const events = byName('events', stateful.tables.events.tableStreamArn);
    const connections = byName('connections');
    const evidenceBucket = Bucket.fromBucketAttributes(this, 'EvidenceBucket', {
      bucketName: names.evidenceBucket,
      encryptionKey: stateful.key,
    });
    const interpreter = StateMachine.fromStateMachineName(this, 'RunInterpreterByName', names.stateMachine);
    const resources: RunResources = {
      state,
      events,
      connections,
      evidenceBucket,
      interpreter,
      queues: stateful.queues,
      key: stateful.key,
      evidenceKey: stateful.evidenceKey,
      eventBus: new EventBus(this, 'Bus', { eventBusName: `${config.prefix}-events` }),
      environment: {
        CAPSTAN_PREFIX: config.prefix,
        CAPSTAN_ENVIRONMENT: config.environment,
        CAPSTAN_STATE_TABLE: state.tableName,
        CAPSTAN_EVENTS_TABLE: events.tableName,
        CAPSTAN_CONNECTIONS_TABLE: connections.tableName,
        CAPSTAN_EVIDENCE_BUCKET: evidenceBucket.bucketName,
        CAPSTAN_STATE_MACHINE_ARN: interpreter.stateMachineArn,
        CAPSTAN_PLATFORM_TENANT: config.platformTenant,
        ...(Object.keys(config.capacity).length > 0 && { CAPSTAN_CAPACITY: JSON.stringify(config.capacity) }),
      },
    };

    const runInterpreter = new RunInterpreter(this, 'RunInterpreter', {
      resources,
      stateMachineName: names.stateMachine,
      policy: policyText(config),
      notifyWebhookUrl: config.notifyWebhookUrl,
    });
    const restApi = new RestApi(this, 'RestApi', {
      resources,
      apiName: `${config.prefix}-api`,
      routes: ROUTES,
      routesDocument,
      secretPrefix: config.secretPrefix,
      notifyWebhookUrl: config.notifyWebhookUrl,
      policy: policyText(config),
      jwt: { issuer: config.jwtIssuer, jwksUrl: config.jwksUrl, audience: config.jwtAudience },
    });
    const liveStream = new LiveStream(this, 'LiveStream', {
      resources,
      apiName: `${config.prefix}-stream`,
      authorizer: restApi.authorizerFunction,
    });
    const reconciler = new Reconciler(this, 'Reconciler', {
      resources,
      notifyWebhookUrl: config.notifyWebhookUrl,
    });
    const ticketIngest = new TicketIngest(this, 'TicketIngest', { resources, routesDocument });
    const lifecycle = new LifecyclePublisher(this, 'LifecyclePublisher', { resources });
    const admitter = new Admitter(this, 'Admitter', { resources, notifyWebhookUrl: config.notifyWebhookUrl });
    const workers = new Workers(this, 'Workers', {
      resources,
      secretPrefix: config.secretPrefix,
      capacity: config.capacity,
    });

    const functions = new Map<string, NodejsFunction>([
      ...runInterpreter.functions,
      ...restApi.functions,
      ...liveStream.functions,
      ['reconciler', reconciler.function],
      ['ticket-ingest', ticketIngest.function],
      ['lifecycle-publisher', lifecycle.function],
      ['admitter', admitter.function],
    ]);
    const operations = new Operations(this, 'Operations', {
      dashboardName: `${config.prefix}-operations`,
      key: stateful.key,
      alarmEmail: config.alarmEmail,
      stateMachine: runInterpreter.stateMachine,
      restApi: restApi.api,
      queues: stateful.queues,
      broadcastFailures: liveStream.failures,
      functions,
      alarmOnErrorsOf: ['plan', 'dispatch', 'reconciler', 'broadcaster'],
    });
    new ServiceMetrics(this, 'ServiceMetrics', { dashboard: operations.dashboard, alarmTopic: operations.alarmTopic });

    this.console = new Console(this, 'Console', {
      assetDir: ensureConsoleBuilt(),
      restApi: restApi.api,
      webSocketUrl: liveStream.stage.url,
      issuer: config.jwtIssuer,
      clientId: config.consoleClientId,
    });
    new CfnOutput(this, 'ConsoleUrl', { value: this.console.url, description: 'The operator console' });

    this.stateMachine = runInterpreter.stateMachine;
    this.restApi = restApi.api;
    this.webSocketApi = liveStream.webSocketApi;
    this.cluster = workers.cluster;
    this.workers = workers.services;
    this.functions = functions;
  }
}

import { fileURLToPath } from 'node:url';
import { Duration, Stack, type StackProps } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  AuthorizationType,
  type IAuthorizer,
  IdentitySource,
  type IResource,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  RequestAuthorizer,
  RestApi,
} from 'aws-cdk-lib/aws-apigateway';
import { type CfnStage, WebSocketApi, WebSocketStage } from 'aws-cdk-lib/aws-apigatewayv2';
import { WebSocketLambdaAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { WebSocketLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  TreatMissingData,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Table } from 'aws-cdk-lib/aws-dynamodb';
import { FlowLogDestination, InterfaceVpcEndpointAwsService, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { Cluster, ContainerImage, ContainerInsights } from 'aws-cdk-lib/aws-ecs';
import { EventBus, Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { StartingPosition } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { DefinitionBody, LogLevel, StateMachine, StateMachineType } from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { SANDBOX_PROFILES } from '../shared/domain/sandbox-profiles.js';
import { ROUTES } from '../shared/resources/routes.js';
import type { TableKey } from '../shared/resources/tables.js';
import {
  DEFINITION_FUNCTIONS,
  type DefinitionPlaceholder,
  loadRunInterpreterDefinition,
} from '../shared/workflow/definition.js';
import { type DeploymentConfig, policyText } from './config.js';
import { CapstanFunction } from './constructs/capstan-function.js';
import { ErrorGatewayResponses } from './constructs/gateway-responses.js';
import { WorkerService } from './constructs/worker-service.js';
import { physicalNames } from './names.js';
import type { StatefulStack } from './stateful-stack.js';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface StatelessStackProps extends StackProps {
  readonly config: DeploymentConfig;
  readonly stateful: StatefulStack;
}

/** What computes: the functions, the APIs, the run interpreter, the workers, schedules and alarms. */
export class StatelessStack extends Stack {
  public readonly restApi: RestApi;
  public readonly webSocketApi: WebSocketApi;
  public readonly stateMachine: StateMachine;
  public readonly cluster: Cluster;
  public readonly workers: ReadonlyMap<string, WorkerService>;
  public readonly functions: ReadonlyMap<string, NodejsFunction>;

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { config, stateful } = props;
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

    // Names every component reads through its config module.
    const commonEnv: Record<string, string> = {
      CAPSTAN_PREFIX: config.prefix,
      CAPSTAN_ENVIRONMENT: config.environment,
      CAPSTAN_STATE_TABLE: state.tableName,
      CAPSTAN_EVENTS_TABLE: events.tableName,
      CAPSTAN_CONNECTIONS_TABLE: connections.tableName,
      CAPSTAN_EVIDENCE_BUCKET: evidenceBucket.bucketName,
      CAPSTAN_STATE_MACHINE_ARN: interpreter.stateMachineArn,
      CAPSTAN_PLATFORM_TENANT: config.platformTenant,
    };
    const functions = new Map<string, NodejsFunction>();
    const fn = (
      name: string,
      entry: string,
      extra: { timeout?: Duration; memorySize?: number } = {},
    ): NodejsFunction => {
      const made = new CapstanFunction(this, `Fn-${name}`, {
        entry,
        environment: commonEnv,
        logKey: stateful.key,
        ...extra,
      }).function;
      functions.set(name, made);
      return made;
    };

    // The run interpreter: one generic state machine, loaded from the file the local stack runs too.
    const workflowFns = Object.fromEntries(
      Object.entries(DEFINITION_FUNCTIONS).map(([placeholder, name]) => [
        placeholder,
        fn(name, `functions/workflow/${name}.ts`),
      ]),
    ) as Record<DefinitionPlaceholder, NodejsFunction>;
    const sfnLogs = new LogGroup(this, 'RunInterpreterLogs', {
      retention: RetentionDays.ONE_MONTH,
      encryptionKey: stateful.key,
    });
    this.stateMachine = new StateMachine(this, 'RunInterpreter', {
      stateMachineName: names.stateMachine,
      stateMachineType: StateMachineType.STANDARD,
      definitionBody: DefinitionBody.fromString(loadRunInterpreterDefinition()),
      definitionSubstitutions: Object.fromEntries(
        Object.entries(workflowFns).map(([placeholder, f]) => [placeholder, f.functionArn]),
      ),
      tracingEnabled: true,
      logs: { destination: sfnLogs, level: LogLevel.ALL, includeExecutionData: false },
    });
    for (const f of Object.values(workflowFns)) f.grantInvoke(this.stateMachine);

    // Queues and the workers' image.
    const queueEnv: Record<string, string> = {};
    for (const [profile, pq] of stateful.queues)
      queueEnv[`CAPSTAN_QUEUE_URL_${profile.replaceAll('-', '_').toUpperCase()}`] = pq.queue.queueUrl;
    for (const f of functions.values()) for (const [k, v] of Object.entries(queueEnv)) f.addEnvironment(k, v);

    // REST API: one function per route, all behind the JWT authorizer except the health check.
    const authorizerFn = fn('authorizer', 'functions/authorizer.ts');
    authorizerFn.addEnvironment('CAPSTAN_JWT_ISSUER', config.jwtIssuer);
    authorizerFn.addEnvironment('CAPSTAN_JWKS_URL', config.jwksUrl);
    authorizerFn.addEnvironment('CAPSTAN_JWT_AUDIENCE', config.jwtAudience);
    const apiLogs = new LogGroup(this, 'ApiAccessLogs', {
      retention: RetentionDays.ONE_MONTH,
      encryptionKey: stateful.key,
    });
    this.restApi = new RestApi(this, 'RestApi', {
      restApiName: `${config.prefix}-api`,
      cloudWatchRole: true,
      deployOptions: {
        stageName: 'prod',
        tracingEnabled: true,
        loggingLevel: MethodLoggingLevel.ERROR,
        accessLogDestination: new LogGroupLogDestination(apiLogs),
        accessLogFormat: AccessLogFormat.jsonWithStandardFields(),
        throttlingBurstLimit: 200,
        throttlingRateLimit: 100,
      },
    });
    new ErrorGatewayResponses(this, 'ErrorResponses', { restApi: this.restApi });
    const requestValidator = this.restApi.addRequestValidator('Validator', {
      validateRequestParameters: true,
    });
    const authorizer: IAuthorizer = new RequestAuthorizer(this, 'Authorizer', {
      handler: authorizerFn,
      identitySources: [IdentitySource.header('Authorization')],
      resultsCacheTtl: Duration.minutes(5),
    });
    const routeFns = new Map<string, NodejsFunction>();
    for (const route of ROUTES) {
      const handler = fn(`api-${route.handler}`, `functions/api/${route.handler}.ts`);
      routeFns.set(route.handler, handler);
      for (const [k, v] of Object.entries(queueEnv)) handler.addEnvironment(k, v);
      const resource = route.path
        .split('/')
        .filter(Boolean)
        .reduce<IResource>((parent, part) => parent.getResource(part) ?? parent.addResource(part), this.restApi.root);
      resource.addMethod(route.method, new LambdaIntegration(handler), {
        authorizer: route.authorized ? authorizer : undefined,
        authorizationType: route.authorized ? AuthorizationType.CUSTOM : AuthorizationType.NONE,
        requestValidator,
      });
    }

    // WebSocket API: subscribe to a run's events; the broadcaster posts them to connections.
    const wsConnect = fn('ws-connect', 'functions/ws/connect.ts');
    const wsDisconnect = fn('ws-disconnect', 'functions/ws/disconnect.ts');
    const wsDefault = fn('ws-default', 'functions/ws/default.ts');
    this.webSocketApi = new WebSocketApi(this, 'WebSocketApi', {
      apiName: `${config.prefix}-stream`,
      connectRouteOptions: {
        integration: new WebSocketLambdaIntegration('ConnectIntegration', wsConnect),
        authorizer: new WebSocketLambdaAuthorizer('Authorizer', authorizerFn, {
          identitySource: ['route.request.querystring.token'],
        }),
      },
      disconnectRouteOptions: {
        integration: new WebSocketLambdaIntegration('DisconnectIntegration', wsDisconnect),
      },
      defaultRouteOptions: { integration: new WebSocketLambdaIntegration('DefaultIntegration', wsDefault) },
    });
    const wsStage = new WebSocketStage(this, 'WebSocketStage', {
      webSocketApi: this.webSocketApi,
      stageName: 'prod',
      autoDeploy: true,
    });
    const wsAccessLogs = new LogGroup(this, 'WebSocketAccessLogs', {
      retention: RetentionDays.ONE_MONTH,
      encryptionKey: stateful.key,
    });
    (wsStage.node.defaultChild as CfnStage).accessLogSettings = {
      destinationArn: wsAccessLogs.logGroupArn,
      format: JSON.stringify({
        requestId: '$context.requestId',
        routeKey: '$context.routeKey',
        status: '$context.status',
        connectionId: '$context.connectionId',
        eventType: '$context.eventType',
        error: '$context.error.message',
      }),
    };
    const broadcaster = fn('broadcaster', 'functions/broadcaster.ts', { timeout: Duration.seconds(60) });
    const streamDlq = new Queue(this, 'BroadcastFailures', {
      encryption: QueueEncryption.KMS,
      encryptionMasterKey: stateful.key,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    broadcaster.addEventSource(
      new DynamoEventSource(events, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: 100,
        bisectBatchOnError: true,
        retryAttempts: 5,
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(streamDlq),
      }),
    );
    for (const f of [wsDefault, broadcaster]) {
      f.addEnvironment('CAPSTAN_WS_ENDPOINT', wsStage.callbackUrl);
      this.webSocketApi.grantManageConnections(f);
    }

    // Schedules and inbound events.
    const reconciler = fn('reconciler', 'functions/reconciler.ts', { timeout: Duration.minutes(2) });
    new Rule(this, 'ReconcileSchedule', {
      description: 'Marks silent workers dead, expires their leases and repairs drift',
      schedule: Schedule.rate(Duration.minutes(1)),
      targets: [new LambdaFunction(reconciler)],
    });
    const bus = new EventBus(this, 'Bus', { eventBusName: `${config.prefix}-events` });
    const ticketIngest = fn('ticket-ingest', 'functions/ticket-ingest.ts');
    new Rule(this, 'TicketEvents', {
      eventBus: bus,
      description: 'Ticket webhooks that start runs',
      eventPattern: { source: ['capstan.tickets'], detailType: ['Ticket Opened', 'Ticket Updated'] },
      targets: [new LambdaFunction(ticketIngest)],
    });

    // Least privilege: each function gets the grants its handlers need.
    // Reading routes and the stream's consumers only read the run state and the event log.
    const readers = new Set([
      ...ROUTES.filter((r) => r.method === 'GET').flatMap((r) => routeFns.get(r.handler) ?? []),
      wsConnect,
      wsDisconnect,
      wsDefault,
      broadcaster,
    ]);
    for (const f of functions.values()) {
      if (f === authorizerFn) continue;
      if (readers.has(f)) {
        state.grantReadData(f);
        events.grantReadData(f);
      } else {
        state.grantReadWriteData(f);
        events.grantReadWriteData(f);
      }
      f.addEnvironment('CAPSTAN_EVENT_BUS', bus.eventBusName);
    }
    for (const f of [wsConnect, wsDisconnect, wsDefault, broadcaster]) connections.grantReadWriteData(f);
    const dispatch = workflowFns.DispatchFunctionArn;
    for (const f of new Set([reconciler, ...Object.values(workflowFns)])) bus.grantPutEventsTo(f);
    // Plan decides every step through the deployment's policy and tells people about gates.
    const plan = workflowFns.PlanFunctionArn;
    plan?.addEnvironment('CAPSTAN_POLICY', policyText(config));
    // Plan posts approval requests; the reconciler posts escalations.
    if (config.notifyWebhookUrl)
      for (const f of [plan, reconciler]) f?.addEnvironment('CAPSTAN_NOTIFY_WEBHOOK_URL', config.notifyWebhookUrl);
    for (const route of ROUTES) {
      const f = routeFns.get(route.handler);
      if (!f) continue;
      for (const access of route.access ?? []) {
        if (access === 'start-runs') interpreter.grantStartExecution(f);
        if (access === 'resume-runs') interpreter.grantTaskResponse(f);
        if (access === 'check-health') {
          connections.grantReadData(f);
          interpreter.grant(f, 'states:DescribeStateMachine');
          for (const pq of stateful.queues.values())
            for (const queue of [pq.queue, pq.deadLetterQueue])
              queue.grant(f, 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes');
          f.addToRolePolicy(new PolicyStatement({ actions: ['s3:ListBucket'], resources: [evidenceBucket.bucketArn] }));
        }
      }
    }
    // The Dispatch task sends commands and resumes its own execution when nothing is left to wait for.
    interpreter.grantTaskResponse(dispatch);
    for (const pq of stateful.queues.values()) pq.queue.grantSendMessages(dispatch);
    // The reconciler re-dispatches recovered step executions, resumes executions and repairs drift.
    interpreter.grantTaskResponse(reconciler);
    interpreter.grantRead(reconciler);
    interpreter.grantStartExecution(reconciler);
    for (const pq of stateful.queues.values()) pq.queue.grantSendMessages(reconciler);
    interpreter.grantStartExecution(ticketIngest);
    evidenceBucket.grantReadWrite(reconciler);

    // Workers: one hardened Fargate service per sandbox profile.
    const vpc = new Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: 1,
      subnetConfiguration: [
        { name: 'public', subnetType: SubnetType.PUBLIC },
        { name: 'workers', subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      ],
      flowLogs: {
        all: {
          destination: FlowLogDestination.toCloudWatchLogs(
            new LogGroup(this, 'FlowLogs', {
              retention: RetentionDays.ONE_MONTH,
              encryptionKey: stateful.key,
            }),
          ),
        },
      },
    });
    for (const [name, service] of Object.entries({
      Sqs: InterfaceVpcEndpointAwsService.SQS,
      Dynamo: InterfaceVpcEndpointAwsService.DYNAMODB,
      Secrets: InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
      States: InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
      Logs: InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
      Ecr: InterfaceVpcEndpointAwsService.ECR,
      EcrDocker: InterfaceVpcEndpointAwsService.ECR_DOCKER,
      S3: InterfaceVpcEndpointAwsService.S3,
    })) {
      vpc.addInterfaceEndpoint(name, { service, subnets: { subnetType: SubnetType.PRIVATE_WITH_EGRESS } });
    }
    this.cluster = new Cluster(this, 'Cluster', { vpc, containerInsightsV2: ContainerInsights.ENABLED });
    const image = ContainerImage.fromAsset(REPO_ROOT, {
      file: 'worker-container/Dockerfile',
      platform: Platform.LINUX_ARM64,
      exclude: ['**', '!worker-container/**', '!shared/**', '!package.json', '!package-lock.json', '!tsconfig.json'],
    });
    const workers = new Map<string, WorkerService>();
    for (const [profileName, pq] of stateful.queues) {
      const worker = new WorkerService(this, `Workers-${profileName}`, {
        profile: SANDBOX_PROFILES[profileName],
        cluster: this.cluster,
        vpc,
        image,
        environment: { ...commonEnv, CAPSTAN_QUEUE_URL: pq.queue.queueUrl },
        secretPrefix: config.secretPrefix,
        logKey: stateful.key,
      });
      const taskRole = worker.taskDefinition.taskRole;
      pq.queue.grantConsumeMessages(taskRole);
      state.grantReadWriteData(taskRole);
      events.grantReadWriteData(taskRole);
      interpreter.grantTaskResponse(taskRole);
      workers.set(profileName, worker);
    }
    this.workers = workers;
    this.functions = functions;

    // Alarms and a dashboard.
    const alarms = new Topic(this, 'Alarms', {
      masterKey: stateful.key,
      enforceSSL: true,
      displayName: 'Capstan alarms',
    });
    if (config.alarmEmail) alarms.addSubscription(new EmailSubscription(config.alarmEmail));
    const alarm = (id: string, metric: IMetric, description: string) => {
      const made = new Alarm(this, id, {
        metric,
        threshold: 0,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
        alarmDescription: description,
      });
      made.addAlarmAction(new SnsAction(alarms));
      return made;
    };
    for (const [profileName, pq] of stateful.queues) {
      alarm(
        `DlqAlarm-${profileName}`,
        pq.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
        `Step commands of ${profileName} reached the DLQ`,
      );
    }
    alarm(
      'FailedRunsAlarm',
      this.stateMachine.metricFailed({ period: Duration.minutes(5) }),
      'A run interpreter execution failed',
    );
    alarm(
      'BroadcastFailuresAlarm',
      streamDlq.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1) }),
      'Events could not be broadcast',
    );
    alarm('Api5xxAlarm', this.restApi.metricServerError({ period: Duration.minutes(5) }), 'The REST API answered 5xx');
    for (const name of ['plan', 'dispatch', 'reconciler', 'broadcaster']) {
      const f = functions.get(name);
      if (f) alarm(`Errors-${name}`, f.metricErrors({ period: Duration.minutes(5) }), `The ${name} function failed`);
    }
    new Dashboard(this, 'Dashboard', {
      dashboardName: `${config.prefix}-operations`,
      widgets: [
        [
          new GraphWidget({
            title: 'Runs',
            left: [
              this.stateMachine.metricStarted(),
              this.stateMachine.metricSucceeded(),
              this.stateMachine.metricFailed(),
            ],
          }),
          new GraphWidget({
            title: 'API',
            left: [this.restApi.metricCount(), this.restApi.metricClientError(), this.restApi.metricServerError()],
            right: [this.restApi.metricLatency()],
          }),
        ],
        [
          new GraphWidget({
            title: 'Queue depth',
            left: [...stateful.queues.values()].map((pq) => pq.queue.metricApproximateNumberOfMessagesVisible()),
          }),
          new GraphWidget({
            title: 'Dead letters',
            left: [...stateful.queues.values()].map((pq) =>
              pq.deadLetterQueue.metricApproximateNumberOfMessagesVisible(),
            ),
          }),
        ],
        [
          new GraphWidget({
            title: 'Function errors',
            left: [...functions.values()].map((f) => f.metricErrors()),
          }),
        ],
      ],
    });
  }
}

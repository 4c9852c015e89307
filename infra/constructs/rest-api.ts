import { Duration } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  AuthorizationType,
  RestApi as ApiGatewayRestApi,
  IdentitySource,
  type IResource,
  LambdaIntegration,
  LogGroupLogDestination,
  MethodLoggingLevel,
  RequestAuthorizer,
} from 'aws-cdk-lib/aws-apigateway';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { RouteAccess, RouteSpec } from '../../shared/resources/routes.js';
import { ErrorGatewayResponses } from './gateway-responses.js';
import { grantReconcile } from './reconciler.js';
import { CapstanFunction } from './capstan-function.js';
import { grantAdmitRuns, grantRunState, queueEnvironment, type RunResources } from './run-resources.js';
import { grantIngestTickets } from './ticket-ingest.js';

/** Who issues the JWTs the API accepts. */
export interface JwtSettings {
  /** `iss` of accepted tokens. */
  readonly issuer: string;
  /** Endpoint of the issuer's signing keys. */
  readonly jwksUrl: string;
  /** `aud` accepted tokens carry. */
  readonly audience: string;
}

export interface RestApiProps {
  readonly resources: RunResources;
  /** Slack-compatible webhook an admin's forced sweep posts escalations to; none when empty. @default '' */
  readonly notifyWebhookUrl?: string;
  /** The ticket routing document (JSON) the webhook route reads. @default '' (no rule) */
  readonly routesDocument?: string;
  /** Where webhook signing keys live: `<secretPrefix>/webhooks/<source>`. @default 'capstan' */
  readonly secretPrefix?: string;
  /** The deployment's policy document, which evidence bundles carry for sealed replay. @default '' */
  readonly policy?: string;
  /** Name of the API; also the prefix of its resources. */
  readonly apiName: string;
  /** One function per route, named for its handler module under `functions/api/`. */
  readonly routes: readonly RouteSpec[];
  readonly jwt: JwtSettings;
  /** @default 100 */
  readonly throttlingRateLimit?: number;
  /** @default 200 */
  readonly throttlingBurstLimit?: number;
}

/**
 * The REST API: one function per route, each behind the JWT authorizer unless the route
 * says otherwise, granted the run state (read-only for GET routes) and the access its route names.
 */
export class RestApi extends Construct {
  public readonly api: ApiGatewayRestApi;
  /** Checks the bearer JWT; the WebSocket API reuses it at `$connect`. */
  public readonly authorizerFunction: NodejsFunction;
  /** The authorizer first, then the route functions, by name (`api-<handler>`). */
  public readonly functions: ReadonlyMap<string, NodejsFunction>;

  constructor(scope: Construct, id: string, props: RestApiProps) {
    super(scope, id);
    const handlers = props.routes.map((r) => r.handler);
    const duplicate = handlers.find((h, i) => handlers.indexOf(h) !== i);
    if (duplicate !== undefined) throw new Error(`RestApi routes name the handler '${duplicate}' twice`);
    const { resources } = props;
    const functions = new Map<string, NodejsFunction>();
    const fn = (name: string, entry: string, environment: Readonly<Record<string, string>>) => {
      const made = new CapstanFunction(this, `Fn-${name}`, { entry, environment, logKey: resources.key }).function;
      functions.set(name, made);
      return made;
    };

    this.authorizerFunction = fn('authorizer', 'functions/authorizer.ts', {
      ...resources.environment,
      CAPSTAN_JWT_ISSUER: props.jwt.issuer,
      CAPSTAN_JWKS_URL: props.jwt.jwksUrl,
      CAPSTAN_JWT_AUDIENCE: props.jwt.audience,
    });
    const accessLogs = new LogGroup(this, 'ApiAccessLogs', {
      retention: RetentionDays.ONE_MONTH,
      encryptionKey: resources.key,
    });
    this.api = new ApiGatewayRestApi(this, 'RestApi', {
      restApiName: props.apiName,
      cloudWatchRole: true,
      deployOptions: {
        stageName: 'prod',
        tracingEnabled: true,
        loggingLevel: MethodLoggingLevel.ERROR,
        accessLogDestination: new LogGroupLogDestination(accessLogs),
        accessLogFormat: AccessLogFormat.jsonWithStandardFields(),
        throttlingBurstLimit: props.throttlingBurstLimit ?? 200,
        throttlingRateLimit: props.throttlingRateLimit ?? 100,
      },
      // Bundles, exports and artifacts are answered as base64 by their functions and sent as bytes.
      binaryMediaTypes: ['application/gzip', 'application/octet-stream'],
    });
    new ErrorGatewayResponses(this, 'ErrorResponses', { restApi: this.api });
    const requestValidator = this.api.addRequestValidator('Validator', { validateRequestParameters: true });
    const authorizer = new RequestAuthorizer(this, 'Authorizer', {
      handler: this.authorizerFunction,
      identitySources: [IdentitySource.header('Authorization')],
      resultsCacheTtl: Duration.minutes(5),
    });

    const environment = { ...resources.environment, ...queueEnvironment(resources) };
    for (const route of props.routes) {
      const handler = fn(`api-${route.handler}`, `functions/api/${route.handler}.ts`, environment);
      const resource = route.path
        .split('/')
        .filter(Boolean)
        .reduce<IResource>((parent, part) => parent.getResource(part) ?? parent.addResource(part), this.api.root);
      // No test-invoke permission: it doubles the Lambda permissions per route, and the stateless
      // stack must stay under CloudFormation's 500 resources as routes are added.
      resource.addMethod(route.method, new LambdaIntegration(handler, { allowTestInvoke: false }), {
        authorizer: route.authorized ? authorizer : undefined,
        authorizationType: route.authorized ? AuthorizationType.CUSTOM : AuthorizationType.NONE,
        requestValidator,
      });
      grantRunState(resources, handler, route.method === 'GET' ? 'read' : 'read-write');
      for (const access of route.access ?? []) this.grantRouteAccess(handler, access, resources, props);
    }
    this.functions = functions;
  }

  private grantRouteAccess(
    handler: NodejsFunction,
    access: RouteAccess,
    resources: RunResources,
    props: Pick<RestApiProps, 'notifyWebhookUrl' | 'policy' | 'routesDocument' | 'secretPrefix'>,
  ): void {
    switch (access) {
      case 'start-runs':
        grantAdmitRuns(resources, handler);
        return;
      case 'resume-runs':
        resources.interpreter.grantTaskResponse(handler);
        return;
      case 'check-health':
        resources.connections.grantReadData(handler);
        resources.interpreter.grant(handler, 'states:DescribeStateMachine');
        for (const pq of resources.queues.values())
          for (const queue of [pq.queue, pq.deadLetterQueue])
            queue.grant(handler, 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes');
        // Bucket-level listing has no grant method; the health check only lists.
        handler.addToRolePolicy(
          new PolicyStatement({ actions: ['s3:ListBucket'], resources: [resources.evidenceBucket.bucketArn] }),
        );
        return;
      case 'reconcile':
        // An admin's forced sweep does what the scheduled reconciler does.
        grantReconcile(resources, handler, props.notifyWebhookUrl);
        return;
      case 'ingest-tickets':
        grantIngestTickets(handler, props.routesDocument ?? '', props.secretPrefix ?? 'capstan');
        return;
      case 'build-evidence':
        // Sign and read the public key only: the key's other uses stay with its administrators.
        resources.evidenceKey.grant(handler, 'kms:Sign', 'kms:GetPublicKey');
        resources.evidenceBucket.grantReadWrite(handler);
        // A GET route reads the run state; recording the bundle's digest on the run is its one write.
        resources.state.grant(handler, 'dynamodb:PutItem');
        handler.addEnvironment('CAPSTAN_EVIDENCE_KEY_ID', resources.evidenceKey.keyArn);
        handler.addEnvironment('CAPSTAN_POLICY', props.policy ?? '');
        return;
      case 'read-evidence':
        resources.evidenceBucket.grantRead(handler);
        return;
      case 'read-queue-depths':
        for (const pq of resources.queues.values())
          for (const queue of pq.stepQueues) queue.grant(handler, 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes');
        return;
      default: {
        const unknown: never = access;
        throw new Error(`RestApi has no grant for route access '${String(unknown)}'`);
      }
    }
  }
}

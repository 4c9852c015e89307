import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ECSClient } from '@aws-sdk/client-ecs';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { KMSClient } from '@aws-sdk/client-kms';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { type AwsService, clientConfig, dynamoDbSockets, required } from '../config.js';
import { traced } from '../observability/tracer.js';
import { InProcessOrHttp } from './in-process.js';

/**
 * Every AWS SDK client Capstan builds: one per service and process, each on the endpoint the
 * configuration resolves (`endpointFor`). Each is built on first use, not at import, because the
 * local stack and the tests import modules before they set the endpoint variables, and only the
 * WebSocket functions have `CAPSTAN_WS_ENDPOINT`.
 */
function once<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

/** Any SDK v3 client: what the factory needs of one. */
type SdkClient = { middlewareStack: { remove(name: string): boolean } };

/**
 * Capstan gives the SDK no logger, yet the SDK's logger middleware still builds a redacted copy of
 * every request and response for its default (no-op) logger, walking the operation's schema over
 * each item: a few percent of a busy handler's CPU, for lines nobody reads. Every client here goes
 * without it; Capstan's own logs say what a request was for.
 */
export function withoutSdkLogging<C extends SdkClient>(client: C): C {
  client.middlewareStack.remove('loggerMiddleware');
  return client;
}

/**
 * A client's configuration: its endpoint where one is configured (the local stack), reached in
 * this process without a socket when this process serves it (`serveInProcess`); for DynamoDB, as
 * many sockets as `CAPSTAN_DYNAMODB_MAX_SOCKETS` allows.
 */
function configFor(service: AwsService) {
  const config = clientConfig(service);
  const sockets = service === 'dynamodb' ? dynamoDbSockets() : undefined;
  if (config.endpoint === undefined && sockets === undefined) return config;
  const agent = sockets === undefined ? undefined : { maxSockets: sockets };
  // With few sockets a burst queues in the client by design: only a request still waiting after 30 s is worth
  // the SDK's warning about it.
  const capped = agent && { httpAgent: agent, httpsAgent: agent, socketAcquisitionWarningTimeout: 30_000 };
  return { ...config, requestHandler: new InProcessOrHttp(capped) };
}

/** A client as the factory hands it out: traced in Lambda, without the SDK's logging. */
const built = <C extends SdkClient>(client: C): C => traced(withoutSdkLogging(client));

export const dynamoDbClient = once(() => built(new DynamoDBClient(configFor('dynamodb'))));
/** A short-lived DynamoDB client on `endpoint`, for set-up that addresses a DynamoDB other than the configured one. */
export const dynamoDbClientAt = (endpoint: string): DynamoDBClient =>
  withoutSdkLogging(new DynamoDBClient({ endpoint }));
// Queue URLs are addressed through the configured endpoint, not the host inside the URL.
export const sqsClient = once(() => built(new SQSClient({ ...configFor('sqs'), useQueueUrlAsEndpoint: false })));
export const sfnClient = once(() => built(new SFNClient(configFor('sfn'))));
export const s3Client = once(() => built(new S3Client(configFor('s3'))));
export const kmsClient = once(() => built(new KMSClient(configFor('kms'))));
export const secretsClient = once(() => built(new SecretsManagerClient(configFor('secretsManager'))));
export const eventBridgeClient = once(() => built(new EventBridgeClient(configFor('eventBridge'))));
// The worker's `aws` backend acts through these.
export const ecsClient = once(() => built(new ECSClient(configFor('ecs'))));
export const ssmClient = once(() => built(new SSMClient(configFor('ssm'))));
export const lambdaClient = once(() => built(new LambdaClient(configFor('lambda'))));
/** The `@connections` API of the WebSocket stage (`CAPSTAN_WS_ENDPOINT`, its callback URL). */
export const connectionsClient = once(() =>
  built(new ApiGatewayManagementApiClient({ endpoint: required('CAPSTAN_WS_ENDPOINT') })),
);

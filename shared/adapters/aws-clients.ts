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
import { clientConfig, required } from '../config.js';
import { traced } from '../observability/tracer.js';

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

export const dynamoDbClient = once(() => traced(new DynamoDBClient(clientConfig('dynamodb'))));
/** A short-lived DynamoDB client on `endpoint`, for set-up that addresses a DynamoDB other than the configured one. */
export const dynamoDbClientAt = (endpoint: string): DynamoDBClient => new DynamoDBClient({ endpoint });
// Queue URLs are addressed through the configured endpoint, not the host inside the URL.
export const sqsClient = once(() => traced(new SQSClient({ ...clientConfig('sqs'), useQueueUrlAsEndpoint: false })));
export const sfnClient = once(() => traced(new SFNClient(clientConfig('sfn'))));
export const s3Client = once(() => traced(new S3Client(clientConfig('s3'))));
export const kmsClient = once(() => traced(new KMSClient(clientConfig('kms'))));
export const secretsClient = once(() => traced(new SecretsManagerClient(clientConfig('secretsManager'))));
export const eventBridgeClient = once(() => traced(new EventBridgeClient(clientConfig('eventBridge'))));
// The worker's `aws` backend acts through these.
export const ecsClient = once(() => traced(new ECSClient(clientConfig('ecs'))));
export const ssmClient = once(() => traced(new SSMClient(clientConfig('ssm'))));
export const lambdaClient = once(() => traced(new LambdaClient(clientConfig('lambda'))));
/** The `@connections` API of the WebSocket stage (`CAPSTAN_WS_ENDPOINT`, its callback URL). */
export const connectionsClient = once(() =>
  traced(new ApiGatewayManagementApiClient({ endpoint: required('CAPSTAN_WS_ENDPOINT') })),
);

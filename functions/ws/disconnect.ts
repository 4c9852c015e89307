import type { APIGatewayProxyResult, APIGatewayProxyWebsocketEventV2 } from 'aws-lambda';
import { makeConnectionStore } from '../../shared/adapters/dynamodb/connection-store.js';
import { documentClient } from '../../shared/adapters/dynamodb/client.js';
import { config } from '../../shared/config.js';
import { lambdaTelemetry } from '../observability.js';

const { observe } = lambdaTelemetry('capstan-ws-disconnect');

const store = makeConnectionStore(documentClient, config().CAPSTAN_CONNECTIONS_TABLE);

/** `$disconnect`: forget the connection and its subscriptions. */
export const handler = observe(async (event: APIGatewayProxyWebsocketEventV2): Promise<APIGatewayProxyResult> => {
  await store.remove(event.requestContext.connectionId);
  return { statusCode: 200, body: '' };
});

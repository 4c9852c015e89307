import type { APIGatewayProxyResult, APIGatewayProxyWebsocketEventV2 } from 'aws-lambda';
import { makeConnectionStore } from '../../shared/adapters/dynamodb/connection-store.js';
import { documentClient } from '../../shared/adapters/dynamodb/client.js';
import { config } from '../../shared/config.js';
import { principalFromAuthorizer } from '../http.js';
import { lambdaTelemetry } from '../observability.js';

const { logger, observe } = lambdaTelemetry('capstan-ws-connect');

const store = makeConnectionStore(documentClient, config().CAPSTAN_CONNECTIONS_TABLE);

type ConnectEvent = APIGatewayProxyWebsocketEventV2 & { requestContext: { authorizer?: unknown } };

/** `$connect`: the authorizer has verified the token; remember who holds the connection. */
export const handler = observe(async (event: ConnectEvent): Promise<APIGatewayProxyResult> => {
  const principal = principalFromAuthorizer(event.requestContext.authorizer);
  if (!principal) return { statusCode: 401, body: 'Unauthorized' };
  await store.open(event.requestContext.connectionId, principal, new Date());
  logger.info('connected', { connectionId: event.requestContext.connectionId, tenantId: principal.tenantId });
  return { statusCode: 200, body: '' };
});

import {
  type ApiGatewayManagementApiClient,
  GoneException,
  PostToConnectionCommand,
} from '@aws-sdk/client-apigatewaymanagementapi';
import type { ConnectionPoster } from '../app/live-stream.js';
import type { ConnectionStore } from './dynamodb/connection-store.js';

/** Posts through the `@connections` API; a closed connection is removed with its subscriptions. */
export function makeConnectionPoster(client: ApiGatewayManagementApiClient, store: ConnectionStore): ConnectionPoster {
  return {
    async post(connectionId, data) {
      try {
        await client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: data }));
        return 'ok';
      } catch (error) {
        if (error instanceof GoneException) return 'gone';
        throw error;
      }
    },
    forget: (connectionId) => store.remove(connectionId),
  };
}

import type { APIGatewayProxyResult, APIGatewayProxyWebsocketEventV2 } from 'aws-lambda';
import { makeLiveStream } from '../../shared/app/live-stream.js';
import { liveStreamDeps } from '../dependencies.js';
import { principalFromAuthorizer } from '../http.js';
import { lambdaTelemetry } from '../observability.js';

const { observe } = lambdaTelemetry('capstan-ws-default');

const live = makeLiveStream(liveStreamDeps());

type MessageEvent = APIGatewayProxyWebsocketEventV2 & { requestContext: { authorizer?: unknown } };

/** `$default`: `{"action": "subscribe", "runId", "lastEventId"?}` replays, then the broadcaster streams. */
export const handler = observe(async (event: MessageEvent): Promise<APIGatewayProxyResult> => {
  const principal = principalFromAuthorizer(event.requestContext.authorizer);
  if (!principal) return { statusCode: 401, body: 'Unauthorized' };
  const body = event.isBase64Encoded ? Buffer.from(event.body ?? '', 'base64').toString('utf8') : (event.body ?? '');
  await live.receive(event.requestContext.connectionId, principal, body);
  return { statusCode: 200, body: '' };
});

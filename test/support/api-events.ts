import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type { Principal } from '../../shared/domain/entities.js';

/** A REST proxy event as API Gateway sends it, with the authorizer context for `principal`. */
export function proxyEvent(options: {
  method: string;
  path: string;
  principal?: Principal;
  body?: string;
  headers?: Record<string, string>;
  pathParameters?: Record<string, string>;
  query?: Record<string, string>;
}): APIGatewayProxyEvent {
  return {
    httpMethod: options.method,
    path: options.path,
    resource: options.path,
    body: options.body ?? null,
    isBase64Encoded: false,
    headers: options.headers ?? {},
    multiValueHeaders: {},
    pathParameters: options.pathParameters ?? null,
    queryStringParameters: options.query ?? null,
    multiValueQueryStringParameters: null,
    stageVariables: null,
    requestContext: {
      authorizer: options.principal
        ? {
            subject: options.principal.subject,
            tenantId: options.principal.tenantId,
            roles: options.principal.roles.join(','),
          }
        : null,
    } as unknown as APIGatewayProxyEvent['requestContext'],
  };
}

export const lambdaContext = {
  functionName: 'test',
  awsRequestId: 'req-1',
  getRemainingTimeInMillis: () => 30_000,
} as unknown as Context;

export type Handler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;

/** Calls a handler and parses its JSON answer. */
export async function call(
  handler: Handler,
  event: APIGatewayProxyEvent,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const result = await handler(event, lambdaContext);
  return { status: result.statusCode, body: result.body ? (JSON.parse(result.body) as Record<string, unknown>) : {} };
}

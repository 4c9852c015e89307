import type { APIGatewayAuthorizerResult, APIGatewayRequestAuthorizerEvent } from 'aws-lambda';
import { makeJwtVerifier } from '../shared/adapters/jwt-verifier.js';
import { config, required } from '../shared/config.js';
import { lambdaTelemetry } from './observability.js';

const { logger, observe } = lambdaTelemetry('capstan-authorizer');

const verify = makeJwtVerifier({
  issuer: required('CAPSTAN_JWT_ISSUER'),
  audience: config().CAPSTAN_JWT_AUDIENCE,
  keys: new URL(required('CAPSTAN_JWKS_URL')),
  maxLifetimeSeconds: config().CAPSTAN_JWT_MAX_LIFETIME_SECONDS,
});

/** A WebSocket connect: API Gateway names the `$connect` route at the end of the method ARN. */
const isWebSocketConnect = (methodArn: string) => methodArn.endsWith('/$connect');

/**
 * The bearer token of a request. REST takes it from the `Authorization` header only, so tokens
 * stay out of URLs and access logs; a WebSocket connect, which browsers cannot give headers, may
 * also pass it as the `token` query parameter.
 */
export function tokenOf(
  event: Pick<APIGatewayRequestAuthorizerEvent, 'headers' | 'queryStringParameters' | 'methodArn'>,
): string | undefined {
  const header = Object.entries(event.headers ?? {}).find(([k]) => k.toLowerCase() === 'authorization')?.[1];
  const bearer = header?.match(/^Bearer\s+(\S+)$/i)?.[1];
  if (bearer) return bearer;
  return isWebSocketConnect(event.methodArn) ? (event.queryStringParameters?.token ?? undefined) : undefined;
}

/**
 * REQUEST authorizer for the REST and WebSocket APIs: verifies the JWT and passes the
 * principal on as context. Any failure is the literal 'Unauthorized', which API Gateway maps to 401.
 */
export const handler = observe(async (event: APIGatewayRequestAuthorizerEvent): Promise<APIGatewayAuthorizerResult> => {
  const token = tokenOf(event);
  if (!token) throw new Error('Unauthorized');
  try {
    const principal = await verify(token);
    // The policy covers the whole API so the cached decision holds for every route of this caller.
    const [arnPrefix] = event.methodArn.split('/');
    return {
      principalId: principal.subject,
      policyDocument: {
        Version: '2012-10-17',
        Statement: [{ Action: 'execute-api:Invoke', Effect: 'Allow', Resource: `${arnPrefix}/*` }],
      },
      context: { subject: principal.subject, tenantId: principal.tenantId, roles: principal.roles.join(',') },
    };
  } catch (error) {
    logger.info('token refused', { reason: (error as Error).message });
    throw new Error('Unauthorized');
  }
});

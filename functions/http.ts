import type { Logger } from '@aws-lambda-powertools/logger';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { z } from 'zod';
import { type Principal, principalSchema, roleSchema } from '../shared/domain/entities.js';
import {
  CapstanError,
  ConflictError,
  ForbiddenError,
  IllegalTransitionError,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
} from '../shared/domain/errors.js';
import { nestsDeeperThan } from '../shared/domain/storable.js';
import { issuesFromZod } from '../shared/domain/zod-issues.js';
import { requireRole } from '../shared/app/authorize.js';
import { makeLogger } from '../shared/observability/logger.js';
import { routeFor } from '../shared/resources/routes.js';
import { lambdaTelemetry } from './observability.js';

/** Logs an error outside any route (a unit test of the mapping); each route logs with its own logger. */
const fallbackLogger = makeLogger('capstan-api');

/** What a route handler sees: the caller and the request, already normalised. */
export interface HttpRequest {
  readonly principal: Principal | undefined;
  readonly body: string | undefined;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly path: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
}

export interface HttpResult {
  readonly status: number;
  readonly body?: unknown;
  /** A binary answer instead of JSON: sent base64-encoded, as API Gateway's proxy integration expects. */
  readonly binary?: {
    readonly contentType: string;
    readonly bytes: Uint8Array;
    readonly headers?: Record<string, string>;
  };
}

const binaryResponse = (status: number, binary: NonNullable<HttpResult['binary']>): APIGatewayProxyResult => ({
  statusCode: status,
  headers: { 'content-type': binary.contentType, ...binary.headers },
  body: Buffer.from(binary.bytes).toString('base64'),
  isBase64Encoded: true,
});

/** The authorizer context: API Gateway hands strings through, so roles arrive comma-separated. */
const authorizerContextSchema = z.object({
  subject: z.string().min(1),
  tenantId: z.string().min(1),
  roles: z.string().transform((text, ctx) => {
    const parsed = z.array(roleSchema).safeParse(text.split(',').filter(Boolean));
    if (!parsed.success) {
      ctx.addIssue({ code: 'custom', message: 'unknown role' });
      return z.NEVER;
    }
    return parsed.data;
  }),
});

/** The caller the authorizer passed on (REST and WebSocket events carry the same context). */
export function principalFromAuthorizer(context: unknown): Principal | undefined {
  const parsed = authorizerContextSchema.safeParse(context ?? {});
  return parsed.success ? principalSchema.parse(parsed.data) : undefined;
}

function principalOf(event: APIGatewayProxyEvent): Principal | undefined {
  return principalFromAuthorizer(event.requestContext?.authorizer);
}

/** The HTTP status of each error class; anything else is a 500 with a generic body. */
function statusOf(error: CapstanError): number {
  if (error instanceof ValidationError) return 400;
  if (error instanceof UnauthorizedError) return 401;
  if (error instanceof ForbiddenError) return 403;
  if (error instanceof NotFoundError) return 404;
  if (error instanceof ConflictError || error instanceof IllegalTransitionError) return 409;
  return 400;
}

const json = (status: number, body: unknown): APIGatewayProxyResult => ({
  statusCode: status,
  headers: { 'content-type': 'application/json' },
  body: body === undefined ? '' : JSON.stringify(body),
});

/**
 * Maps an error to the contract's error body: 4xx for what the caller did, a generic 500 otherwise.
 * A 500 names the request id, so the caller can quote it and an operator can find the log line.
 */
export function errorResponse(
  error: unknown,
  requestId?: string,
  logger: Logger = fallbackLogger,
): APIGatewayProxyResult {
  if (error instanceof z.ZodError) {
    return json(400, {
      error: { code: 'VALIDATION_FAILED', message: 'the request is not valid', details: issuesFromZod(error) },
    });
  }
  if (error instanceof CapstanError) {
    const details = error.details === undefined ? {} : { details: error.details };
    return json(statusOf(error), { error: { code: error.code, message: error.message, ...details } });
  }
  logger.error('request failed', { error: error as Error, requestId });
  return json(500, {
    error: {
      code: 'INTERNAL',
      message: `something went wrong; quote request id ${requestId ?? 'unknown'} to find it in the logs`,
      ...(requestId && { details: { requestId } }),
    },
  });
}

/** Requires an authenticated caller: the authorizer context is missing only on a misconfigured route. */
export function requirePrincipal(request: HttpRequest): Principal {
  if (!request.principal) throw new UnauthorizedError('authentication is required');
  return request.principal;
}

/** Levels a request body may nest; the stored values inside it have a tighter limit of their own. */
const MAX_BODY_DEPTH = 64;

/** Parses a JSON body with a zod schema; a missing or malformed body is a 400 naming `body`. */
export function parseJsonBody<T extends z.ZodType>(request: HttpRequest, schema: T): z.infer<T> {
  if (request.body === undefined || request.body === '') {
    throw new ValidationError('the request needs a JSON body', [{ path: 'body', message: 'required' }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(request.body);
  } catch (error) {
    throw new ValidationError('the body is not valid JSON', [{ path: 'body', message: (error as Error).message }]);
  }
  // Refused before any schema walks it: a schema recursing through thousands of levels overflows the stack.
  if (nestsDeeperThan(value, MAX_BODY_DEPTH)) {
    throw new ValidationError('the body nests too deeply', [
      { path: 'body', message: `nests deeper than ${MAX_BODY_DEPTH} levels` },
    ]);
  }
  return schema.parse(value);
}

/**
 * Wraps a route: the shared observability middleware (its own logger, so an error log names this
 * function even where several run in one process), then error mapping, the event normalised into
 * an {@link HttpRequest}.
 */
export function httpHandler(
  route: (request: HttpRequest) => Promise<HttpResult>,
  { logger, observe } = lambdaTelemetry('capstan-api'),
) {
  return observe<APIGatewayProxyEvent, APIGatewayProxyResult>(async (event) => {
    try {
      const headers = Object.fromEntries(
        Object.entries(event.headers ?? {}).flatMap(([k, v]) => (v === undefined ? [] : [[k.toLowerCase(), v]])),
      );
      const body =
        event.body === null
          ? undefined
          : event.isBase64Encoded
            ? Buffer.from(event.body, 'base64').toString('utf8')
            : event.body;
      const principal = principalOf(event);
      authorizeRoute(event, principal);
      const result = await route({
        principal,
        body,
        headers,
        path: clean(event.pathParameters),
        query: clean(event.queryStringParameters),
      });
      return result.binary ? binaryResponse(result.status, result.binary) : json(result.status, result.body);
    } catch (error) {
      return errorResponse(error, event.requestContext?.requestId, logger);
    }
  });
}

/**
 * The one role check: the route table's roles for the route called. A caller without a principal
 * is left to `requirePrincipal` (401); a request for no known route is refused.
 */
function authorizeRoute(event: APIGatewayProxyEvent, principal: Principal | undefined): void {
  const spec = routeFor(event.httpMethod, event.resource);
  if (!spec) throw new ForbiddenError(`no route ${event.httpMethod} ${event.resource}`);
  if (spec.authorized && principal) requireRole(principal, spec.roles, `${spec.method} ${spec.path}`);
}

function clean(values: Record<string, string | undefined> | null): Record<string, string> {
  return Object.fromEntries(Object.entries(values ?? {}).flatMap(([k, v]) => (v === undefined ? [] : [[k, v]])));
}

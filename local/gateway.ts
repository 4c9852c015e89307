import { createServer, type IncomingMessage, type Server } from 'node:http';
import type {
  APIGatewayAuthorizerResult,
  APIGatewayProxyEvent,
  APIGatewayProxyResult,
  APIGatewayRequestAuthorizerEvent,
  Context,
} from 'aws-lambda';
import { ROUTES, type RouteSpec } from '../shared/resources/routes.js';
import { bindHost } from './bind-host.js';
import { type ConsoleFiles, serveConsole } from './console-files.js';
import { decodeSegment, sendError, sendJson } from './http-reply.js';
import { WebSocketGateway } from './websocket.js';

type ProxyHandler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;
type Authorizer = (event: APIGatewayRequestAuthorizerEvent) => Promise<APIGatewayAuthorizerResult>;

export interface GatewayOptions {
  readonly port: number;
  readonly authorizer: Authorizer;
  /** Extra GET paths served as JSON (the local JWKS). */
  readonly staticJson: Readonly<Record<string, unknown>>;
  /** Invokes the WebSocket route functions in-process. */
  readonly invoke: (functionName: string, event: unknown) => Promise<unknown>;
  /** The operator console, served at `/` (its static files; `/v1` and `/ws` stay the API's). */
  readonly console?: ConsoleFiles;
  readonly log?: (line: string) => void;
}

export interface Gateway {
  readonly server: Server;
  readonly webSocket: WebSocketGateway;
  close(): Promise<void>;
}

/** API Gateway's limit on request headers; past it the reply is a 431. */
const MAX_HEADER_BYTES = 10 * 1024;

/** The WebSocket API's path, and the stage path of its `@connections` API. */
export const WEBSOCKET_PATH = '/ws';

interface CompiledRoute {
  readonly spec: RouteSpec;
  readonly pattern: RegExp;
  readonly params: string[];
}

const compiled: CompiledRoute[] = ROUTES.map((spec) => {
  const params: string[] = [];
  const source = spec.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    params.push(name);
    return '([^/]+)';
  });
  return { spec, pattern: new RegExp(`^${source}$`), params };
});

const handlers = new Map<string, Promise<ProxyHandler>>();
/** Imports a route's handler module once, the way a warm Lambda keeps it. */
function handlerFor(name: string): Promise<ProxyHandler> {
  let loaded = handlers.get(name);
  if (!loaded) {
    loaded = import(`../functions/api/${name}.ts`).then((m: { handler: ProxyHandler }) => m.handler);
    handlers.set(name, loaded);
  }
  return loaded;
}

const context = (name: string): Context =>
  ({
    functionName: name,
    awsRequestId: crypto.randomUUID(),
    getRemainingTimeInMillis: () => 29_000,
  }) as unknown as Context;

/** API Gateway's payload limit: a larger request is a 413 before any function runs. */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

class BodyTooLarge extends Error {}

async function readBody(req: IncomingMessage): Promise<string | null> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY_BYTES) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 0 ? null : Buffer.concat(chunks).toString('utf8');
}

/**
 * The local API Gateway. REST: matches a route from the shared route table, runs the same
 * REQUEST authorizer as AWS, and invokes the route's handler with a proxy event. WebSocket:
 * see `WebSocketGateway`, on `/ws`, with its `@connections` API under the same path.
 */
export function startGateway(options: GatewayOptions): Promise<Gateway> {
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    const requestId = crypto.randomUUID();
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      let body: string | null;
      try {
        body = await readBody(req);
      } catch (error) {
        if (!(error instanceof BodyTooLarge)) throw error;
        res.setHeader('connection', 'close');
        return sendError(res, 413, 'PAYLOAD_TOO_LARGE', `the request body is larger than ${MAX_BODY_BYTES} bytes`);
      }
      if (webSocket.handleManagement(req, res, url.pathname, body)) return;
      const staticBody = req.method === 'GET' ? options.staticJson[url.pathname] : undefined;
      if (staticBody !== undefined) return sendJson(res, 200, staticBody);
      if (
        options.console &&
        req.method === 'GET' &&
        !url.pathname.startsWith('/v1/') &&
        (await serveConsole(options.console, url.pathname, res))
      )
        return;
      const match = compiled
        .map((route) => ({ route, found: route.pattern.exec(url.pathname) }))
        .find(({ route, found }) => found && route.spec.method === req.method);
      if (!match?.found) {
        const pathKnown = compiled.some((route) => route.pattern.test(url.pathname));
        return sendError(
          res,
          pathKnown ? 405 : 404,
          pathKnown ? 'METHOD_NOT_ALLOWED' : 'NOT_FOUND',
          `no route for ${req.method} ${url.pathname}`,
        );
      }
      const { route, found } = match;
      const pathParameters: Record<string, string> = {};
      for (const [i, name] of route.params.entries()) {
        const decoded = decodeSegment(found[i + 1] ?? '');
        if (decoded === undefined) {
          return sendError(res, 400, 'VALIDATION_FAILED', 'the path is not valid', {
            details: [{ path: `path.${name}`, message: 'has a malformed % escape' }],
          });
        }
        pathParameters[name] = decoded;
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : [])),
      );
      const query = Object.fromEntries(url.searchParams.entries());
      let authorizerContext: Record<string, unknown> | null = null;
      if (route.spec.authorized) {
        try {
          const result = await options.authorizer({
            type: 'REQUEST',
            methodArn: `arn:aws:execute-api:local:000000000000:local/prod/${route.spec.method}${route.spec.path}`,
            headers,
            queryStringParameters: query,
          } as unknown as APIGatewayRequestAuthorizerEvent);
          authorizerContext = result.context ?? {};
        } catch {
          return sendError(res, 401, 'UNAUTHORIZED', 'a valid bearer token is required');
        }
      }
      const event = {
        httpMethod: route.spec.method,
        path: url.pathname,
        resource: route.spec.path,
        headers,
        multiValueHeaders: {},
        queryStringParameters: Object.keys(query).length > 0 ? query : null,
        multiValueQueryStringParameters: null,
        pathParameters: route.params.length > 0 ? pathParameters : null,
        stageVariables: null,
        body,
        isBase64Encoded: false,
        requestContext: { authorizer: authorizerContext, requestId, stage: 'local' },
      } as unknown as APIGatewayProxyEvent;
      const handler = await handlerFor(route.spec.handler);
      const result = await handler(event, context(route.spec.handler));
      const resultHeaders = Object.fromEntries(Object.entries(result.headers ?? {}).map(([k, v]) => [k, String(v)]));
      // As API Gateway does for a binary media type: a base64 body goes out as its bytes.
      if (result.isBase64Encoded) {
        res.writeHead(result.statusCode, resultHeaders);
        res.end(Buffer.from(result.body, 'base64'));
        return;
      }
      sendJson(res, result.statusCode, result.body, resultHeaders);
    })().catch((error: unknown) => {
      console.error('gateway error', requestId, error);
      if (!res.headersSent) {
        sendError(res, 502, 'BAD_GATEWAY', `the function failed; quote request id ${requestId}`, {
          details: { requestId },
        });
      }
    });
  });
  // Malformed requests never reach a route: answer them in the error shape too, as API Gateway does.
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy();
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    const [status, reason, code] = tooLarge
      ? [431, 'Request Header Fields Too Large', 'HEADERS_TOO_LARGE']
      : [400, 'Bad Request', 'BAD_REQUEST'];
    const payload = JSON.stringify({
      error: { code, message: tooLarge ? 'the request headers are too large' : 'the request is malformed' },
    });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
    );
  });
  const webSocket = new WebSocketGateway(server, {
    path: WEBSOCKET_PATH,
    authorizer: options.authorizer,
    invoke: options.invoke,
    log: options.log,
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, bindHost(), () =>
      resolve({
        server,
        webSocket,
        close: async () => {
          await webSocket.close();
          await new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          });
        },
      }),
    );
  });
}

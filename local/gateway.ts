import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type {
  APIGatewayAuthorizerResult,
  APIGatewayProxyEvent,
  APIGatewayProxyResult,
  APIGatewayRequestAuthorizerEvent,
  Context,
} from 'aws-lambda';
import { ROUTES, type RouteSpec } from '../shared/resources/routes.js';
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
  readonly log?: (line: string) => void;
}

export interface Gateway {
  readonly server: Server;
  readonly webSocket: WebSocketGateway;
  close(): Promise<void>;
}

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

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 0 ? null : Buffer.concat(chunks).toString('utf8');
}

/**
 * The local API Gateway. REST: matches a route from the shared route table, runs the same
 * REQUEST authorizer as AWS, and invokes the route's handler with a proxy event. WebSocket:
 * see `WebSocketGateway`, on `/ws`, with its `@connections` API under the same path.
 */
export function startGateway(options: GatewayOptions): Promise<Gateway> {
  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const body = await readBody(req);
      if (webSocket.handleManagement(req, res, url.pathname, body)) return;
      const staticBody = req.method === 'GET' ? options.staticJson[url.pathname] : undefined;
      if (staticBody !== undefined) return send(res, 200, staticBody);
      const match = compiled
        .map((route) => ({ route, found: route.pattern.exec(url.pathname) }))
        .find(({ route, found }) => found && route.spec.method === req.method);
      if (!match?.found) {
        const pathKnown = compiled.some((route) => route.pattern.test(url.pathname));
        return send(res, pathKnown ? 405 : 404, {
          error: {
            code: pathKnown ? 'METHOD_NOT_ALLOWED' : 'NOT_FOUND',
            message: `no route for ${req.method} ${url.pathname}`,
          },
        });
      }
      const { route, found } = match;
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
          return send(res, 401, { message: 'Unauthorized' });
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
        pathParameters:
          route.params.length > 0
            ? Object.fromEntries(route.params.map((p, i) => [p, decodeURIComponent(found[i + 1] ?? '')]))
            : null,
        stageVariables: null,
        body,
        isBase64Encoded: false,
        requestContext: { authorizer: authorizerContext, requestId: crypto.randomUUID(), stage: 'local' },
      } as unknown as APIGatewayProxyEvent;
      const handler = await handlerFor(route.spec.handler);
      const result = await handler(event, context(route.spec.handler));
      send(
        res,
        result.statusCode,
        result.body,
        Object.fromEntries(Object.entries(result.headers ?? {}).map(([k, v]) => [k, String(v)])),
      );
    })().catch((error: unknown) => {
      console.error('gateway error', error);
      if (!res.headersSent) send(res, 502, { message: 'Internal server error' });
    });
  });
  const webSocket = new WebSocketGateway(server, {
    path: WEBSOCKET_PATH,
    authorizer: options.authorizer,
    invoke: options.invoke,
    log: options.log,
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, '127.0.0.1', () =>
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

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { APIGatewayAuthorizerResult, APIGatewayRequestAuthorizerEvent } from 'aws-lambda';
import { WebSocket, WebSocketServer } from 'ws';
import { decodeSegment, sendError } from './http-reply.js';

type Authorizer = (event: APIGatewayRequestAuthorizerEvent) => Promise<APIGatewayAuthorizerResult>;
type Invoke = (functionName: string, event: unknown) => Promise<unknown>;

export interface WebSocketGatewayOptions {
  /** The path clients connect to, and the stage path of the `@connections` API. */
  readonly path: string;
  readonly authorizer: Authorizer;
  readonly invoke: Invoke;
  readonly log?: (line: string) => void;
}

interface Connection {
  readonly socket: WebSocket;
  readonly connectedAt: Date;
  lastActiveAt: Date;
  readonly sourceIp: string;
  readonly userAgent: string;
  readonly authorizer: Record<string, unknown>;
}

interface RouteResult {
  readonly statusCode?: number;
}

/**
 * The local WebSocket API: `$connect` (behind the REQUEST authorizer), `$disconnect` and
 * `$default` routes invoked with API Gateway's event shapes, and the `@connections` management
 * API (POST, GET, DELETE; 410 GoneException for a connection that is closed) that the real
 * ApiGatewayManagementApi client talks to.
 */
export class WebSocketGateway {
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly connections = new Map<string, Connection>();
  private readonly managementPattern: RegExp;

  constructor(
    server: Server,
    private readonly options: WebSocketGatewayOptions,
  ) {
    this.managementPattern = new RegExp(`^${options.path}/@connections/([^/]+)$`);
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      void this.upgrade(req, socket, head).catch((error: unknown) => {
        options.log?.(`websocket: connect failed: ${(error as Error).message}`);
        reject(socket, 500, 'Internal Server Error');
      });
    });
  }

  get size(): number {
    return this.connections.size;
  }

  /** Serves `@connections` requests; false when the path is not one. */
  handleManagement(req: IncomingMessage, res: ServerResponse, path: string, body: string | null): boolean {
    const match = this.managementPattern.exec(path);
    if (!match?.[1]) return false;
    const connectionId = decodeSegment(match[1]);
    if (connectionId === undefined) {
      sendError(res, 400, 'VALIDATION_FAILED', 'the connection id is not valid', {
        details: [{ path: 'path.connectionId', message: 'has a malformed % escape' }],
      });
      return true;
    }
    const connection = this.connections.get(connectionId);
    const reply = (status: number, payload?: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(payload === undefined ? undefined : JSON.stringify(payload));
    };
    if (!connection || connection.socket.readyState !== WebSocket.OPEN) {
      // The SDK reads the error type from the header; the body has the API's error shape.
      sendError(res, 410, 'GONE', `connection '${connectionId}' is gone`, {
        headers: { 'x-amzn-errortype': 'GoneException' },
      });
      return true;
    }
    switch (req.method) {
      case 'POST':
        connection.socket.send(body ?? '');
        reply(200);
        return true;
      case 'GET':
        reply(200, {
          connectedAt: connection.connectedAt.toISOString(),
          lastActiveAt: connection.lastActiveAt.toISOString(),
          identity: { sourceIp: connection.sourceIp, userAgent: connection.userAgent },
        });
        return true;
      case 'DELETE':
        connection.socket.close(1000, 'closed by the server');
        reply(204);
        return true;
      default:
        sendError(res, 405, 'METHOD_NOT_ALLOWED', `method ${req.method} not allowed`);
        return true;
    }
  }

  /** Closes every connection (each gets its `$disconnect`). */
  async close(): Promise<void> {
    const closing = [...this.connections.values()].map(
      (c) => new Promise<void>((done) => c.socket.once('close', () => done()).close(1001, 'going away')),
    );
    await Promise.race([Promise.all(closing), new Promise((done) => setTimeout(done, 1000))]);
    this.wss.close();
  }

  private requestContext(routeKey: string, eventType: string, connectionId: string, authorizer: unknown) {
    return {
      routeKey,
      eventType,
      connectionId,
      authorizer,
      apiId: 'local',
      stage: this.options.path.replace(/^\//, ''),
      domainName: '127.0.0.1',
      requestId: crypto.randomUUID(),
      requestTimeEpoch: Date.now(),
    };
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== this.options.path) return reject(socket, 404, 'Not Found');
    const headers = Object.fromEntries(
      Object.entries(req.headers).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : [])),
    );
    const query = Object.fromEntries(url.searchParams.entries());
    let authorizer: Record<string, unknown>;
    try {
      const result = await this.options.authorizer({
        type: 'REQUEST',
        methodArn: 'arn:aws:execute-api:local:000000000000:local/ws/$connect',
        headers,
        queryStringParameters: query,
      } as unknown as APIGatewayRequestAuthorizerEvent);
      authorizer = { ...result.context, principalId: result.principalId };
    } catch {
      return reject(socket, 401, 'Unauthorized');
    }
    const connectionId = Buffer.from(crypto.getRandomValues(new Uint8Array(12))).toString('base64url');
    const connected = (await this.options.invoke('ws-connect', {
      headers,
      queryStringParameters: query,
      isBase64Encoded: false,
      requestContext: {
        ...this.requestContext('$connect', 'CONNECT', connectionId, authorizer),
        connectedAt: Date.now(),
      },
    })) as RouteResult | undefined;
    if ((connected?.statusCode ?? 200) >= 300) return reject(socket, connected?.statusCode ?? 403, 'Forbidden');

    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const connection: Connection = {
        socket: ws,
        connectedAt: new Date(),
        lastActiveAt: new Date(),
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: req.headers['user-agent'] ?? '',
        authorizer,
      };
      this.connections.set(connectionId, connection);
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        connection.lastActiveAt = new Date();
        void this.options
          .invoke('ws-default', {
            body: isBinary ? data.toString('base64') : data.toString('utf8'),
            isBase64Encoded: isBinary,
            requestContext: this.requestContext('$default', 'MESSAGE', connectionId, authorizer),
          })
          .catch((error: unknown) => this.options.log?.(`websocket: $default failed: ${(error as Error).message}`));
      });
      ws.on('close', () => {
        this.connections.delete(connectionId);
        void this.options
          .invoke('ws-disconnect', {
            isBase64Encoded: false,
            requestContext: this.requestContext('$disconnect', 'DISCONNECT', connectionId, authorizer),
          })
          .catch((error: unknown) => this.options.log?.(`websocket: $disconnect failed: ${(error as Error).message}`));
      });
    });
  }
}

/** Refuses an upgrade with a plain HTTP reply whose body has the API's error shape. */
function reject(socket: Duplex, status: number, reason: string): void {
  const code = reason.toUpperCase().replace(/[^A-Z]+/g, '_');
  const body = JSON.stringify({ error: { code, message: reason } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nConnection: close\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

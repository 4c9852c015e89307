import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { bindHost } from './bind-host.js';
import { type DemoNodes, makeDemoNodes } from './demo-nodes.js';

/** A service the example runbooks act on locally: a health check, a ticket system, a chat webhook and a web pool. */
export interface DemoService {
  readonly url: string;
  /** The demo web pool under `/nodes/{id}/...` (rolling-restart acts on it). */
  readonly nodes: DemoNodes;
  /** The messages posted to `/hooks/<name>`, oldest first. */
  messages(hook: string): readonly string[];
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 64 * 1024;

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  let size = 0;
  const parts: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString('utf8');
}

function textOf(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === 'object' && parsed !== null && 'text' in parsed && typeof parsed.text === 'string')
      return parsed.text;
  } catch {
    return undefined;
  }
  return undefined;
}

/**
 * Starts the demo service on loopback: `GET /health` (a healthy service with its database),
 * `GET /tickets/{id}` (a ticket system stub), `POST /hooks/{name}` (a Slack-compatible incoming
 * webhook that keeps what it receives), and `/nodes/{id}/drain|restart|health|enable` (a small
 * web pool, see `demo-nodes.ts`). The examples in `examples/runbooks/` call it, so each runs to its
 * end on `npm start` without anything outside this machine.
 */
export async function startDemoService(port: number, host = bindHost()): Promise<DemoService> {
  const hooks = new Map<string, string[]>();
  const nodes = makeDemoNodes();
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://local').pathname;
    const node = nodes.handle(req.method ?? '', path);
    if (node) {
      // The request body (if any) is not read: node actions take none.
      req.resume();
      void node.then(({ status, body }) => reply(res, status, body));
      return;
    }
    const ticket = /^\/tickets\/([A-Za-z0-9._-]{1,64})$/.exec(path);
    const hook = /^\/hooks\/([A-Za-z0-9._-]{1,64})$/.exec(path);
    if (req.method === 'GET' && path === '/health')
      return reply(res, 200, { status: 'ok', db: { status: 'ok' }, checkedAt: new Date().toISOString() });
    if (req.method === 'GET' && ticket?.[1])
      return reply(res, 200, {
        id: ticket[1],
        title: 'orders-api answers slowly',
        status: 'open',
        priority: 'high',
        service: 'orders-api',
      });
    if (req.method === 'POST' && hook?.[1]) {
      const name = hook[1];
      void readBody(req).then((body) => {
        const text = body === undefined ? undefined : textOf(body);
        if (text === undefined) return reply(res, 400, { error: 'a JSON body with "text" is required' });
        hooks.set(name, [...(hooks.get(name) ?? []), text]);
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('ok');
      });
      return;
    }
    reply(res, 404, { error: `no route for ${req.method ?? ''} ${path}` });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound}`,
    nodes,
    messages: (name) => hooks.get(name) ?? [],
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

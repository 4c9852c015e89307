import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

/** The headers CloudFront's response headers policy sets in AWS, so the console meets them locally too. */
export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy':
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
};

export interface ConsoleFiles {
  /** The built console (`console/dist`). */
  readonly dir: string;
  /** Files served from memory: `config.json`, and locally the development identities. */
  readonly json: Readonly<Record<string, unknown>>;
}

/**
 * Serves the console's static files for a GET outside the API's paths; answers false when the
 * path is not the console's. Only files inside `dir` are read; `/` is `index.html`.
 */
export async function serveConsole(files: ConsoleFiles, pathname: string, res: ServerResponse): Promise<boolean> {
  const generated = files.json[pathname];
  const headers = { ...CONSOLE_SECURITY_HEADERS, 'cache-control': 'no-store' };
  if (generated !== undefined) {
    res.writeHead(200, { ...headers, 'content-type': 'application/json' });
    res.end(JSON.stringify(generated));
    return true;
  }
  const relative = pathname === '/' ? 'index.html' : normalize(decodeURIComponent(pathname)).replace(/^[/\\]+/, '');
  const path = join(files.dir, relative);
  if (!path.startsWith(files.dir + sep) || !(extname(path) in TYPES)) return false;
  let body: Buffer;
  try {
    body = await readFile(path);
  } catch {
    return false;
  }
  res.writeHead(200, { ...headers, 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' });
  res.end(body);
  return true;
}

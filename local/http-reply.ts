import type { ServerResponse } from 'node:http';

/** Writes a JSON reply. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** Writes an error in the API's one error shape, `{"error": {"code", "message", "details"?}}`. */
export function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  options: { details?: unknown; headers?: Record<string, string> } = {},
): void {
  const error = { code, message, ...(options.details === undefined ? {} : { details: options.details }) };
  sendJson(res, status, { error }, options.headers);
}

/** Decodes one `%`-escaped path segment; undefined when its escapes are malformed. */
export function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

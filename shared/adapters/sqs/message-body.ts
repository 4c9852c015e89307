/**
 * JSON for a queue message body that every queue can carry: characters outside printable ASCII
 * are written as `\uXXXX` escapes. SQS refuses U+FFFE, U+FFFF and other non-characters (and
 * some emulators refuse characters outside the BMP), while `JSON.parse` on the worker restores
 * the exact text, so the parameters arrive as they were stored.
 */
export function queueSafeJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[^\x20-\x7e]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

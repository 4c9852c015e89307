import { createHmac, timingSafeEqual } from 'node:crypto';

/** How old a signed webhook may be, and how far in the future its clock may run. */
export const SIGNATURE_WINDOW_SECONDS = 300;

/** `sha256=<hex>`: HMAC-SHA256 of `<timestamp>.<body>` under the source's key. */
export function signWebhook(key: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', key).update(`${timestamp}.${body}`, 'utf8').digest('hex')}`;
}

export type SignatureVerdict =
  { readonly ok: true } | { readonly ok: false; readonly reason: 'missing' | 'malformed' | 'stale' | 'mismatch' };

/**
 * Checks a webhook's `X-Capstan-Signature` and `X-Capstan-Timestamp` against the key: the
 * timestamp must be within {@link SIGNATURE_WINDOW_SECONDS} of `nowSeconds`, and the digests are
 * compared in constant time.
 */
export function verifyWebhook(input: {
  key: string;
  body: string;
  signature: string | undefined;
  timestamp: string | undefined;
  nowSeconds: number;
}): SignatureVerdict {
  const { signature, timestamp } = input;
  if (signature === undefined || timestamp === undefined) return { ok: false, reason: 'missing' };
  if (!/^\d{1,12}$/.test(timestamp) || !/^sha256=[0-9a-fA-F]{64}$/.test(signature))
    return { ok: false, reason: 'malformed' };
  if (Math.abs(input.nowSeconds - Number(timestamp)) > SIGNATURE_WINDOW_SECONDS) return { ok: false, reason: 'stale' };
  const expected = Buffer.from(signWebhook(input.key, timestamp, input.body).slice(7), 'hex');
  const given = Buffer.from(signature.slice(7), 'hex');
  return timingSafeEqual(expected, given) ? { ok: true } : { ok: false, reason: 'mismatch' };
}

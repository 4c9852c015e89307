import { z } from 'zod';

/**
 * The interface every local service listens on. Loopback by default: the local services are
 * unauthenticated, so they are reachable from this machine only. `CAPSTAN_BIND_HOST=0.0.0.0`
 * (or `::`) opens them to the network on purpose; clients keep using 127.0.0.1.
 */
const bindHostSchema = z.enum(['127.0.0.1', '0.0.0.0', '::']).default('127.0.0.1');

export function bindHost(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const parsed = bindHostSchema.safeParse(env.CAPSTAN_BIND_HOST || undefined);
  if (!parsed.success) {
    throw new Error(
      `invalid configuration: CAPSTAN_BIND_HOST must be 127.0.0.1, 0.0.0.0 or ::, got '${env.CAPSTAN_BIND_HOST}'`,
    );
  }
  return parsed.data;
}

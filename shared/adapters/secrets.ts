import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/** Secret values by id, fetched when a step starts. */
export interface SecretSource {
  get(secretId: string): Promise<string>;
}

/** How long a fetched value is reused: never more than five minutes. */
export const SECRET_CACHE_MS = 5 * 60_000;

/** Secrets Manager, with each value cached for at most {@link SECRET_CACHE_MS}. */
export function makeSecretsManagerSource(
  client: SecretsManagerClient,
  options: { ttlMs?: number; now?: () => number } = {},
): SecretSource & { readonly size: number } {
  const ttl = Math.min(options.ttlMs ?? SECRET_CACHE_MS, SECRET_CACHE_MS);
  const now = options.now ?? Date.now;
  const cache = new Map<string, { value: string; until: number }>();
  return {
    get size() {
      return cache.size;
    },
    async get(secretId) {
      const hit = cache.get(secretId);
      if (hit && hit.until > now()) return hit.value;
      const { SecretString, SecretBinary } = await client.send(new GetSecretValueCommand({ SecretId: secretId }));
      const value = SecretString ?? (SecretBinary ? Buffer.from(SecretBinary).toString('utf8') : undefined);
      if (value === undefined) throw new Error(`secret ${secretId} has no value`);
      cache.set(secretId, { value, until: now() + ttl });
      return value;
    },
  };
}

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { ConfigNotFoundError, UsageError } from './errors.js';

/** Where the CLI sends its requests, and as whom. */
export interface ApiConfig {
  /** The REST base, ending in `/v1`. */
  readonly url: string;
  readonly token: string;
  /** The WebSocket API; without it `--wait` follows the events endpoint instead. */
  readonly wsUrl?: string;
  /** Where the address and token came from, for error messages. */
  readonly source: string;
}

export interface ConfigFlags {
  readonly url?: string;
  readonly token?: string;
  readonly wsUrl?: string;
  readonly as?: string;
}

/** What `npm start` writes (brief: "The local stack"). */
export const localFileSchema = z.object({
  restUrl: z.string().url(),
  wsUrl: z.string().optional(),
  tokens: z.record(z.string(), z.string()),
});

export const LOCAL_FILE = join('.capstan', 'local.json');

/** The nearest `.capstan/local.json` from `cwd` upward, if any. */
export function findLocalFile(cwd: string, exists: (path: string) => boolean = existsSync): string | undefined {
  for (let dir = cwd; ; dir = dirname(dir)) {
    const candidate = join(dir, LOCAL_FILE);
    if (exists(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/** `http://host/prod` and `http://host/prod/v1/` both become `http://host/prod/v1`. */
export function normaliseUrl(url: string): string {
  const trimmed = url.replace(/\/+$/, '');
  return trimmed.endsWith('/v1') ? trimmed : `${trimmed}/v1`;
}

const nonEmpty = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);

/**
 * Resolves the API address and token, each on its own: `--url`/`--token`, then `CAPSTAN_URL`/
 * `CAPSTAN_TOKEN`, then the nearest `.capstan/local.json` with the token of `--as` (operator).
 */
export function resolveConfig(
  flags: ConfigFlags,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
  fs: { exists(path: string): boolean; read(path: string): string } = {
    exists: existsSync,
    read: (path) => readFileSync(path, 'utf8'),
  },
): ApiConfig {
  const role = flags.as ?? 'operator';
  let url = nonEmpty(flags.url) ?? nonEmpty(env.CAPSTAN_URL);
  let token = nonEmpty(flags.token) ?? nonEmpty(env.CAPSTAN_TOKEN);
  let wsUrl = nonEmpty(flags.wsUrl) ?? nonEmpty(env.CAPSTAN_WS_URL);
  let source = flags.url !== undefined ? '--url' : url !== undefined ? 'CAPSTAN_URL' : '';
  if (url === undefined || token === undefined) {
    const file = findLocalFile(cwd, fs.exists);
    if (!file)
      throw new ConfigNotFoundError(
        `no Capstan API configured (${url === undefined ? 'no address' : 'no token'})`,
        'pass --url and --token, set CAPSTAN_URL and CAPSTAN_TOKEN, or run `npm start` in a Capstan checkout (it writes .capstan/local.json)',
      );
    let local: z.infer<typeof localFileSchema>;
    try {
      local = localFileSchema.parse(JSON.parse(fs.read(file)));
    } catch (error) {
      throw new ConfigNotFoundError(
        `${file} is not a Capstan local file (${(error as Error).message.split('\n')[0]})`,
        'restart the local stack with `npm start` to write it again',
      );
    }
    url ??= local.restUrl;
    wsUrl ??= local.wsUrl;
    if (token === undefined) {
      token = local.tokens[role];
      if (token === undefined)
        throw new UsageError(
          `${file} has no token for '${role}'`,
          `use --as with one of: ${Object.keys(local.tokens).join(', ')}`,
        );
    }
    source = source || `${file} (as ${role})`;
  }
  return { url: normaliseUrl(url), token, ...(wsUrl !== undefined && { wsUrl }), source };
}

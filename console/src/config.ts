import * as z from 'zod/mini';

/** How the console signs in: a development identity locally, OIDC with PKCE in AWS. */
const authSchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('local'), identitiesUrl: z.string() }),
  z.object({
    mode: z.literal('oidc'),
    issuer: z.url(),
    clientId: z.string().check(z.minLength(1)),
    scope: z._default(z.string(), 'openid'),
  }),
]);

/** `config.json`, written beside the console: by the local gateway, or at deploy by the CDK stack. */
export const consoleConfigSchema = z.object({
  /** The REST API's `/v1` base, absolute or relative to the console's origin. */
  apiUrl: z.string().check(z.minLength(1)),
  /** The WebSocket API's URL (`wss://...`); the token goes as `?token=`. */
  wsUrl: z.string().check(z.minLength(1)),
  auth: authSchema,
});
export type ConsoleConfig = z.infer<typeof consoleConfigSchema>;
export type AuthConfig = z.infer<typeof authSchema>;

/** Reads and checks `config.json`; a bad one names the field. */
export async function loadConfig(url = 'config.json'): Promise<ConsoleConfig> {
  const response = await fetch(url, { cache: 'no-store' });
  if (!response.ok) throw new Error(`config.json answered ${response.status}`);
  const parsed = consoleConfigSchema.safeParse(await response.json());
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`config.json: ${issue?.path.join('.') ?? ''} ${issue?.message ?? 'is not valid'}`);
  }
  return parsed.data;
}

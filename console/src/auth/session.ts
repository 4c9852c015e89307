import * as z from 'zod/mini';
import type { AuthConfig } from '../config.js';
import {
  authorizeUrl,
  challengeFor,
  discoveryUrl,
  makeVerifier,
  type OidcEndpoints,
  readCallback,
  tokenRequestBody,
} from './pkce.js';

export type Role = 'viewer' | 'operator' | 'approver' | 'admin';

/** Who is signed in: the bearer token and the claims the console shapes itself by. */
export interface Identity {
  readonly token: string;
  readonly sub: string;
  readonly tenant: string;
  readonly roles: readonly Role[];
  /** The development identity's name, locally. */
  readonly label?: string;
}

const claimsSchema = z.object({
  sub: z.string(),
  tenant: z.string(),
  roles: z._default(z.array(z.enum(['viewer', 'operator', 'approver', 'admin'])), []),
  exp: z.optional(z.number()),
});

/**
 * The claims of a JWT, read without verifying: the API verifies every request; the console only
 * uses them to hide what the role may not do.
 */
export function identityFromToken(token: string, label?: string): Identity | undefined {
  const part = token.split('.')[1];
  if (!part) return undefined;
  try {
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
    const claims = claimsSchema.safeParse(JSON.parse(json));
    if (!claims.success) return undefined;
    if (claims.data.exp !== undefined && claims.data.exp * 1000 < Date.now()) return undefined;
    return { token, sub: claims.data.sub, tenant: claims.data.tenant, roles: claims.data.roles, label };
  } catch {
    return undefined;
  }
}

/** True when one of the identity's roles may do what `allowed` names. */
export const hasRole = (identity: Identity, allowed: readonly Role[]): boolean =>
  identity.roles.some((role) => allowed.includes(role));
export const CAN_OPERATE: readonly Role[] = ['operator', 'admin'];
export const CAN_APPROVE: readonly Role[] = ['approver', 'admin'];

const TOKEN_KEY = 'capstan.token';
const LABEL_KEY = 'capstan.label';
const VERIFIER_KEY = 'capstan.pkce.verifier';
const STATE_KEY = 'capstan.pkce.state';

/** The identity kept in this tab's session storage, if it is still valid. */
export function storedIdentity(): Identity | undefined {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? identityFromToken(token, sessionStorage.getItem(LABEL_KEY) ?? undefined) : undefined;
}

export function keepIdentity(identity: Identity): void {
  sessionStorage.setItem(TOKEN_KEY, identity.token);
  if (identity.label) sessionStorage.setItem(LABEL_KEY, identity.label);
  else sessionStorage.removeItem(LABEL_KEY);
}

export function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(LABEL_KEY);
}

/** A development identity the local gateway offers. */
export const localIdentitySchema = z.object({
  name: z.string(),
  sub: z.string(),
  tenant: z.string(),
  roles: z.array(z.string()),
  token: z.string(),
});
export type LocalIdentity = z.infer<typeof localIdentitySchema>;

export async function loadLocalIdentities(url: string): Promise<LocalIdentity[]> {
  const response = await fetch(url, { cache: 'no-store' });
  if (!response.ok) throw new Error(`the development identities answered ${response.status}`);
  return z.object({ identities: z.array(localIdentitySchema) }).parse(await response.json()).identities;
}

type OidcConfig = Extract<AuthConfig, { mode: 'oidc' }>;
const endpointsSchema = z.object({ authorization_endpoint: z.url(), token_endpoint: z.url() });
const redirectUri = () => `${location.origin}${location.pathname}`;

async function discover(config: OidcConfig): Promise<OidcEndpoints> {
  const response = await fetch(discoveryUrl(config.issuer));
  if (!response.ok) throw new Error(`the issuer's discovery document answered ${response.status}`);
  return endpointsSchema.parse(await response.json());
}

/** Sends the browser to the issuer to sign in. */
export async function beginOidcSignIn(config: OidcConfig): Promise<void> {
  const endpoints = await discover(config);
  const verifier = makeVerifier();
  const state = makeVerifier();
  sessionStorage.setItem(VERIFIER_KEY, verifier);
  sessionStorage.setItem(STATE_KEY, state);
  location.assign(
    authorizeUrl(endpoints, {
      clientId: config.clientId,
      redirectUri: redirectUri(),
      scope: config.scope,
      state,
      challenge: await challengeFor(verifier),
    }),
  );
}

/** Finishes a sign-in when the issuer redirected back with a code; undefined when there is none. */
export async function completeOidcSignIn(config: OidcConfig): Promise<Identity | undefined> {
  const callback = readCallback(location.search, sessionStorage.getItem(STATE_KEY));
  if (callback.kind === 'none') return undefined;
  history.replaceState(null, '', redirectUri() + location.hash);
  if (callback.kind === 'error') throw new Error(callback.message);
  const verifier = sessionStorage.getItem(VERIFIER_KEY) ?? '';
  sessionStorage.removeItem(VERIFIER_KEY);
  sessionStorage.removeItem(STATE_KEY);
  const endpoints = await discover(config);
  const response = await fetch(endpoints.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: tokenRequestBody({ code: callback.code, verifier, clientId: config.clientId, redirectUri: redirectUri() }),
  });
  if (!response.ok) throw new Error(`the issuer refused the sign-in (${response.status})`);
  const tokens = z
    .object({ access_token: z.optional(z.string()), id_token: z.optional(z.string()) })
    .parse(await response.json());
  // The API's authorizer needs the tenant and roles claims; whichever token carries them is the bearer.
  const identity = [tokens.access_token, tokens.id_token]
    .flatMap((t) => (t ? [identityFromToken(t)] : []))
    .find((i) => i !== undefined);
  if (!identity) throw new Error('the issuer answered no token with tenant and roles claims');
  return identity;
}

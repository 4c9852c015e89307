/**
 * OIDC authorization code flow with PKCE (RFC 7636) for a public browser client: no secret,
 * the code bound to a one-time verifier kept in session storage until the redirect comes back.
 */

const base64url = (bytes: Uint8Array): string => {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

/** A code verifier: 32 random bytes, base64url (43 characters, within RFC 7636's 43..128). */
export function makeVerifier(random: (bytes: Uint8Array) => Uint8Array = (b) => crypto.getRandomValues(b)): string {
  return base64url(random(new Uint8Array(32)));
}

/** The S256 challenge of a verifier: base64url(sha256(verifier)). */
export async function challengeFor(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** The endpoints an issuer's discovery document names. */
export interface OidcEndpoints {
  readonly authorization_endpoint: string;
  readonly token_endpoint: string;
}

/** The discovery document's address: `<issuer>/.well-known/openid-configuration`. */
export const discoveryUrl = (issuer: string): string =>
  `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;

export interface AuthorizeRequest {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly scope: string;
  readonly state: string;
  readonly challenge: string;
}

/** The authorization request URL (response_type=code, S256). */
export function authorizeUrl(endpoints: OidcEndpoints, request: AuthorizeRequest): string {
  const url = new URL(endpoints.authorization_endpoint);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', request.clientId);
  url.searchParams.set('redirect_uri', request.redirectUri);
  url.searchParams.set('scope', request.scope);
  url.searchParams.set('state', request.state);
  url.searchParams.set('code_challenge', request.challenge);
  url.searchParams.set('code_challenge_method', 'S256');
  return url.toString();
}

/** The token request body that redeems a code with its verifier. */
export function tokenRequestBody(input: {
  code: string;
  verifier: string;
  clientId: string;
  redirectUri: string;
}): URLSearchParams {
  return new URLSearchParams({
    grant_type: 'authorization_code',
    code: input.code,
    code_verifier: input.verifier,
    client_id: input.clientId,
    redirect_uri: input.redirectUri,
  });
}

/** What came back on the redirect: a code for our state, an error, or nothing to do. */
export type Callback =
  | { readonly kind: 'code'; readonly code: string }
  | { readonly kind: 'error'; readonly message: string }
  | { readonly kind: 'none' };

/** Reads the redirect's query; a state that is not the one we sent is refused (CSRF). */
export function readCallback(search: string, expectedState: string | null): Callback {
  const params = new URLSearchParams(search);
  const error = params.get('error');
  if (error) return { kind: 'error', message: params.get('error_description') ?? error };
  const code = params.get('code');
  if (!code) return { kind: 'none' };
  if (!expectedState || params.get('state') !== expectedState)
    return { kind: 'error', message: 'the sign-in answer does not match the request sent; sign in again' };
  return { kind: 'code', code };
}

import { describe, expect, it } from 'vitest';
import {
  authorizeUrl,
  challengeFor,
  discoveryUrl,
  makeVerifier,
  readCallback,
  tokenRequestBody,
} from '../../console/src/auth/pkce.js';

describe('the console sign-in with OIDC and PKCE', () => {
  it('derives the S256 challenge of RFC 7636 appendix B', async () => {
    expect(await challengeFor('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe(
      'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    );
  });

  it('makes a 43-character base64url verifier from 32 random bytes', () => {
    const verifier = makeVerifier();
    expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(makeVerifier()).not.toBe(verifier);
  });

  it('builds the authorization request with the code flow, the client, the state and the S256 challenge', () => {
    const url = new URL(
      authorizeUrl(
        {
          authorization_endpoint: 'https://id.example.com/oauth2/authorize?tenant=x',
          token_endpoint: 'https://id.example.com/token',
        },
        {
          clientId: 'capstan-console',
          redirectUri: 'https://console.example.com/',
          scope: 'openid',
          state: 's1',
          challenge: 'c1',
        },
      ),
    );
    expect(url.origin + url.pathname).toBe('https://id.example.com/oauth2/authorize');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      tenant: 'x',
      response_type: 'code',
      client_id: 'capstan-console',
      redirect_uri: 'https://console.example.com/',
      scope: 'openid',
      state: 's1',
      code_challenge: 'c1',
      code_challenge_method: 'S256',
    });
    expect(discoveryUrl('https://id.example.com/')).toBe('https://id.example.com/.well-known/openid-configuration');
  });

  it('redeems the code with its verifier and refuses a redirect whose state it did not send', () => {
    expect(
      Object.fromEntries(tokenRequestBody({ code: 'k', verifier: 'v', clientId: 'c', redirectUri: 'https://r/' })),
    ).toEqual({
      grant_type: 'authorization_code',
      code: 'k',
      code_verifier: 'v',
      client_id: 'c',
      redirect_uri: 'https://r/',
    });
    expect(readCallback('?code=k&state=s1', 's1')).toEqual({ kind: 'code', code: 'k' });
    expect(readCallback('?code=k&state=forged', 's1')).toMatchObject({ kind: 'error' });
    expect(readCallback('?code=k&state=s1', null)).toMatchObject({ kind: 'error' });
    expect(readCallback('?error=access_denied&error_description=no', 's1')).toEqual({ kind: 'error', message: 'no' });
    expect(readCallback('', 's1')).toEqual({ kind: 'none' });
  });
});

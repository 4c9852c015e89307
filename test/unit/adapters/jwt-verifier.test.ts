import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeJwtVerifier } from '../../../shared/adapters/jwt-verifier.js';
import { UnauthorizedError } from '../../../shared/domain/errors.js';

const ISSUER = 'https://issuer.test/';
let sign: (
  claims: Record<string, unknown>,
  options?: { audience?: string; issuer?: string; expiresIn?: string },
) => Promise<string>;
let verify: (token: string) => Promise<unknown>;
let foreignSign: typeof sign;
let key: Parameters<SignJWT['sign']>[0];

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const foreign = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
  key = privateKey;
  verify = makeJwtVerifier({
    issuer: ISSUER,
    audience: 'capstan',
    keys: createLocalJWKSet({ keys: [jwk] }),
    maxLifetimeSeconds: 86_400,
  });
  const signer =
    (key: Parameters<SignJWT['sign']>[0]) =>
    async (claims: Record<string, unknown>, options: { audience?: string; issuer?: string; expiresIn?: string } = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuer(options.issuer ?? ISSUER)
        .setAudience(options.audience ?? 'capstan')
        .setIssuedAt()
        .setExpirationTime(options.expiresIn ?? '5m')
        .sign(key);
  sign = signer(privateKey);
  foreignSign = signer(foreign.privateKey);
});

describe('the JWT verifier', () => {
  it('reads subject, tenant and roles from a valid token', async () => {
    const token = await sign({ sub: 'ada', tenant: 'acme', roles: ['operator', 'approver'] });
    await expect(verify(token)).resolves.toEqual({ subject: 'ada', tenantId: 'acme', roles: ['operator', 'approver'] });
  });

  it.each([
    ['another audience', { audience: 'elsewhere' }],
    ['another issuer', { issuer: 'https://evil.test/' }],
    ['an expired token', { expiresIn: '-1m' }],
  ])('refuses %s', async (_label, options) => {
    const token = await sign({ sub: 'ada', tenant: 'acme', roles: ['operator'] }, options);
    await expect(verify(token)).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it('refuses a validly signed token that carries no exp', async () => {
    const token = await new SignJWT({ sub: 'ada', tenant: 'acme', roles: ['operator'] })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience('capstan')
      .setIssuedAt()
      .sign(key);
    await expect(verify(token)).rejects.toThrow(/exp/);
  });

  it('refuses a token that lives longer than the maximum lifetime', async () => {
    const token = await sign({ sub: 'ada', tenant: 'acme', roles: ['operator'] }, { expiresIn: '25h' });
    await expect(verify(token)).rejects.toThrow(/at most 86400 s/);
  });

  it('accepts a token that lives exactly the maximum lifetime', async () => {
    const token = await sign({ sub: 'ada', tenant: 'acme', roles: ['operator'] }, { expiresIn: '24h' });
    await expect(verify(token)).resolves.toMatchObject({ subject: 'ada' });
  });

  it('refuses a token signed by another key', async () => {
    const token = await foreignSign({ sub: 'ada', tenant: 'acme', roles: ['admin'] });
    await expect(verify(token)).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it('refuses a token without a tenant or with an unknown role', async () => {
    await expect(verify(await sign({ sub: 'ada', roles: ['operator'] }))).rejects.toThrow(/tenant/);
    await expect(verify(await sign({ sub: 'ada', tenant: 'acme', roles: ['root'] }))).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
  });

  it('refuses text that is not a token', async () => {
    await expect(verify('not-a-jwt')).rejects.toBeInstanceOf(UnauthorizedError);
  });
});

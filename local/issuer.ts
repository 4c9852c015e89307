import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import type { Role } from '../shared/domain/entities.js';

/** The development identities `npm start` issues tokens for (brief: `.capstan/local.json`). */
export const LOCAL_IDENTITIES: Record<string, { sub: string; tenant: string; roles: Role[] }> = {
  operator: { sub: 'olivia.operator', tenant: 'local', roles: ['operator'] },
  approver: { sub: 'adam.approver', tenant: 'local', roles: ['approver'] },
  approver2: { sub: 'beth.approver', tenant: 'local', roles: ['approver'] },
  admin: { sub: 'ada.admin', tenant: 'local', roles: ['admin'] },
  otherTenant: { sub: 'oscar.other', tenant: 'other', roles: ['admin'] },
};

export interface LocalIssuer {
  readonly jwks: { keys: JWK[] };
  readonly tokens: Record<string, string>;
}

/**
 * A local JWT issuer: one ES256 key kept in `keyFile` (so tokens survive a restart), its public
 * JWKS for the authorizer, and a token per development identity.
 */
export async function makeLocalIssuer(keyFile: string, issuer: string, audience: string): Promise<LocalIssuer> {
  let privateJwk: JWK;
  if (existsSync(keyFile)) {
    privateJwk = JSON.parse(readFileSync(keyFile, 'utf8')) as JWK;
  } else {
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    privateJwk = { ...(await exportJWK(privateKey)), kid: 'capstan-local', alg: 'ES256' };
    writeFileSync(keyFile, JSON.stringify(privateJwk), { mode: 0o600 });
  }
  const { d: _private, ...publicJwk } = privateJwk;
  const key = await importJWK(privateJwk, 'ES256');
  const tokens: Record<string, string> = {};
  for (const [name, identity] of Object.entries(LOCAL_IDENTITIES)) {
    tokens[name] = await new SignJWT({ tenant: identity.tenant, roles: identity.roles })
      .setProtectedHeader({ alg: 'ES256', kid: 'capstan-local' })
      .setSubject(identity.sub)
      .setIssuer(issuer)
      .setAudience(audience)
      .setIssuedAt()
      // Within the authorizer's default maximum lifetime (24 h): each start issues fresh tokens.
      .setExpirationTime('24h')
      .sign(key);
  }
  return { jwks: { keys: [publicJwk] }, tokens };
}

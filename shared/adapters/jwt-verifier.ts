import { createRemoteJWKSet, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { z } from 'zod';
import { type Principal, roleSchema } from '../domain/entities.js';
import { UnauthorizedError } from '../domain/errors.js';

/** The claims Capstan reads from a token: subject, tenant, roles, and when it was issued and expires. */
const claimsSchema = z.object({
  sub: z.string().min(1),
  tenant: z.string().min(1),
  roles: z.array(roleSchema).min(1),
  iat: z.number(),
  exp: z.number(),
});

export interface JwtVerifierOptions {
  readonly issuer: string;
  readonly audience: string;
  /** Where the signing keys are: a JWKS URL in AWS, or a key set given directly. */
  readonly keys: URL | JWTVerifyGetKey;
  /** The longest `exp - iat` accepted: a token that never expires, or lives for months, is refused. */
  readonly maxLifetimeSeconds: number;
}

/**
 * Verifies bearer tokens (signature, issuer, audience, expiry, which must be present, and
 * lifetime) and reads the principal from them.
 */
export function makeJwtVerifier(options: JwtVerifierOptions): (token: string) => Promise<Principal> {
  const keys = options.keys instanceof URL ? createRemoteJWKSet(options.keys) : options.keys;
  return async (token) => {
    let payload: unknown;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: options.issuer,
        audience: options.audience,
        algorithms: ['RS256', 'ES256'],
        requiredClaims: ['exp', 'iat'],
      }));
    } catch (error) {
      throw new UnauthorizedError(`the token is not valid: ${(error as Error).message}`);
    }
    const claims = claimsSchema.safeParse(payload);
    if (!claims.success) throw new UnauthorizedError('the token lacks the sub, tenant, roles, iat or exp claim');
    const lifetime = claims.data.exp - claims.data.iat;
    if (lifetime > options.maxLifetimeSeconds) {
      throw new UnauthorizedError(
        `the token lives ${lifetime} s; at most ${options.maxLifetimeSeconds} s are accepted`,
      );
    }
    return { subject: claims.data.sub, tenantId: claims.data.tenant, roles: claims.data.roles };
  };
}

import { createRemoteJWKSet, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { z } from 'zod';
import { type Principal, roleSchema } from '../domain/entities.js';
import { UnauthorizedError } from '../domain/errors.js';

/** The claims Capstan reads from a token: subject, tenant and roles. */
const claimsSchema = z.object({
  sub: z.string().min(1),
  tenant: z.string().min(1),
  roles: z.array(roleSchema).min(1),
});

export interface JwtVerifierOptions {
  readonly issuer: string;
  readonly audience: string;
  /** Where the signing keys are: a JWKS URL in AWS, or a key set given directly. */
  readonly keys: URL | JWTVerifyGetKey;
}

/** Verifies bearer tokens (signature, issuer, audience, expiry) and reads the principal from them. */
export function makeJwtVerifier(options: JwtVerifierOptions): (token: string) => Promise<Principal> {
  const keys = options.keys instanceof URL ? createRemoteJWKSet(options.keys) : options.keys;
  return async (token) => {
    let payload: unknown;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: options.issuer,
        audience: options.audience,
        algorithms: ['RS256', 'ES256'],
      }));
    } catch (error) {
      throw new UnauthorizedError(`the token is not valid: ${(error as Error).message}`);
    }
    const claims = claimsSchema.safeParse(payload);
    if (!claims.success) throw new UnauthorizedError('the token lacks the sub, tenant or roles claim');
    return { subject: claims.data.sub, tenantId: claims.data.tenant, roles: claims.data.roles };
  };
}

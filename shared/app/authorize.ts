import type { Principal, Role } from '../domain/entities.js';
import { ForbiddenError } from '../domain/errors.js';

/** Throws {@link ForbiddenError} unless the principal has one of the roles. */
export function requireRole(principal: Principal, roles: readonly Role[], action: string): void {
  if (!principal.roles.some((role) => roles.includes(role))) {
    throw new ForbiddenError(`${action} needs one of the roles ${roles.join(', ')}`);
  }
}

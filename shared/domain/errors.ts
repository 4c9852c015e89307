/** One problem with an input, located by a path such as `phases[0].steps[2].timeout`. */
export interface Issue {
  readonly path: string;
  readonly message: string;
  /** 1-based line in the source document, when the input came from a file. */
  readonly line?: number;
  readonly column?: number;
}

/** Base of every error Capstan raises on purpose; `code` is stable and documented. */
export abstract class CapstanError extends Error {
  abstract readonly code: string;
  readonly details?: unknown;

  constructor(message: string, details?: unknown) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
}

/** Input that does not match its schema; `details` lists every issue found. */
export class ValidationError extends CapstanError {
  readonly code = 'VALIDATION_FAILED';
  declare readonly details: readonly Issue[];

  constructor(
    message: string,
    readonly issues: readonly Issue[],
  ) {
    super(message, issues);
  }
}

/** The thing does not exist, or the caller's tenant may not see it (the two look the same). */
export class NotFoundError extends CapstanError {
  readonly code = 'NOT_FOUND';
}

/** The caller is known but not allowed to do this. */
export class ForbiddenError extends CapstanError {
  readonly code = 'FORBIDDEN';
}

/** The caller is not authenticated. */
export class UnauthorizedError extends CapstanError {
  readonly code = 'UNAUTHORIZED';
}

/** The request conflicts with the stored state (an idempotency key reused with another body, ...). */
export class ConflictError extends CapstanError {
  readonly code = 'CONFLICT';
}

/** A state machine was asked to move along an edge its transition table does not have. */
export class IllegalTransitionError extends CapstanError {
  readonly code = 'ILLEGAL_TRANSITION';

  constructor(
    readonly machine: string,
    readonly from: string,
    readonly to: string,
  ) {
    super(`${machine} cannot go from '${from}' to '${to}'`, { machine, from, to });
  }
}

/**
 * A conditional write found the stored state changed since it was read (another writer ended the
 * execution, decided the gate, took the lease, ...): the change no longer applies as decided.
 */
export class StaleWriteError extends CapstanError {
  readonly code = 'STALE_WRITE';

  constructor(readonly reasons: readonly string[]) {
    super(`a conditional write failed: ${reasons.join(', ')}`, { reasons });
  }
}

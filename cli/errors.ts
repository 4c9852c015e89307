import { CapstanError } from '../shared/domain/errors.js';

/** The CLI's exit codes (brief: "CLI"). */
export const EXIT = { ok: 0, failed: 1, usage: 2, api: 3 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI reports as one line, with what to do next, and an exit code. */
export abstract class CliError extends CapstanError {
  abstract readonly exitCode: ExitCode;

  constructor(
    message: string,
    /** What to do next, printed after the message. */
    readonly hint?: string,
    details?: unknown,
  ) {
    super(message, details);
  }
}

/** The command line is wrong: a missing argument, a bad value. Exit 2. */
export class UsageError extends CliError {
  readonly code = 'USAGE';
  readonly exitCode = EXIT.usage;
}

/** No API address or token could be found. Exit 2. */
export class ConfigNotFoundError extends CliError {
  readonly code = 'CONFIG_NOT_FOUND';
  readonly exitCode = EXIT.usage;
}

/** The API answered an error. Exit 3. */
export class ApiError extends CliError {
  readonly exitCode = EXIT.api;

  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    hint?: string,
    details?: unknown,
  ) {
    super(message, hint, details);
  }
}

/** The API could not be reached, or the live stream could not be kept. Exit 3. */
export class NetworkError extends CliError {
  readonly code = 'NETWORK';
  readonly exitCode = EXIT.api;
}

/** A run ended failed or cancelled, or a runbook file is not valid. Exit 1. */
export class FailedError extends CliError {
  readonly code = 'FAILED';
  readonly exitCode = EXIT.failed;
}

import type { Command } from 'commander';
import { ApiClient } from './client.js';
import { type ApiConfig, resolveConfig } from './config.js';
import { makeOutput, type Output } from './output.js';

/** The options every command takes (set on the program, read from any subcommand). */
export interface GlobalOptions {
  readonly url?: string;
  readonly token?: string;
  readonly wsUrl?: string;
  readonly as?: string;
  readonly json?: boolean;
  readonly color?: boolean;
}

/** What a command runs with: where to print, and (resolved only when needed) the API. */
export interface Context {
  readonly output: Output;
  readonly env: Readonly<Record<string, string | undefined>>;
  config(): ApiConfig;
  client(): ApiClient;
}

export interface Environment {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  readonly isTTY: boolean;
  readonly write?: (text: string) => void;
  readonly writeError?: (text: string) => void;
  readonly fetch?: typeof fetch;
}

export function makeContext(options: GlobalOptions, environment: Environment): Context {
  const output = makeOutput({
    json: options.json === true,
    colorFlag: options.color !== false,
    isTTY: environment.isTTY,
    env: environment.env,
    ...(environment.write && { write: environment.write }),
    ...(environment.writeError && { writeError: environment.writeError }),
  });
  let config: ApiConfig | undefined;
  const resolved = () =>
    (config ??= resolveConfig(
      {
        ...(options.url !== undefined && { url: options.url }),
        ...(options.token !== undefined && { token: options.token }),
        ...(options.wsUrl !== undefined && { wsUrl: options.wsUrl }),
        ...(options.as !== undefined && { as: options.as }),
      },
      environment.env,
      environment.cwd,
    ));
  let client: ApiClient | undefined;
  return {
    output,
    env: environment.env,
    config: resolved,
    client: () => (client ??= new ApiClient(resolved(), environment.fetch)),
  };
}

/** The context of the command being run: its options merged with the program's. */
export type ContextFor = (command: Command) => Context;

/** Adds an example to a command's `--help`. */
export function example<T extends Command>(command: T, ...lines: string[]): T {
  return command.addHelpText(
    'after',
    `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((l) => `  $ ${l}`).join('\n')}`,
  );
}

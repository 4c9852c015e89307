import { Command, CommanderError } from 'commander';
import { CapstanError, ValidationError } from '../shared/domain/errors.js';
import { registerAdmissionCommands } from './commands/admission.js';
import { registerEvidenceCommands } from './commands/evidence.js';
import { registerInventoryCommands } from './commands/inventory.js';
import { registerOperationCommands } from './commands/operations.js';
import { registerRunbookCommands } from './commands/runbooks.js';
import { registerRunCommands } from './commands/runs.js';
import { registerStatusCommand } from './commands/status.js';
import { type Environment, type GlobalOptions, example, makeContext } from './context.js';
import { ApiError, CliError, EXIT, type ExitCode } from './errors.js';
import { issueLines } from './issues.js';
import { makeOutput, paint } from './output.js';

/** The `capstan` program: every command, with the options they share. */
export function buildProgram(environment: Environment): Command {
  const program = new Command('capstan')
    .description('Capstan from the command line: runbooks, runs, approvals and workers')
    .option('--url <url>', 'the REST API (default: CAPSTAN_URL, then .capstan/local.json)')
    .option('--token <jwt>', 'the bearer token (default: CAPSTAN_TOKEN, then .capstan/local.json)')
    .option('--ws-url <url>', 'the WebSocket API for --wait (default: CAPSTAN_WS_URL, then .capstan/local.json)')
    .option('--as <role>', 'with .capstan/local.json: whose token to use', 'operator')
    .option('--json', 'machine-readable output: one JSON value per line')
    .option('--no-color', 'no colour (also NO_COLOR=1, or when not on a terminal)')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => (environment.write ?? ((t: string) => process.stdout.write(t)))(text),
      writeErr: (text) => (environment.writeError ?? ((t: string) => process.stderr.write(t)))(text),
    });
  example(program, 'capstan runbooks push examples/runbooks/hello.yaml', 'capstan run hello --wait');
  const contextFor = (command: Command) => makeContext(command.optsWithGlobals<GlobalOptions>(), environment);
  registerRunbookCommands(program, contextFor);
  registerRunCommands(program, contextFor);
  registerOperationCommands(program, contextFor);
  registerInventoryCommands(program, contextFor);
  registerStatusCommand(program, contextFor);
  registerEvidenceCommands(program, contextFor);
  registerAdmissionCommands(program, contextFor);
  // Subcommands report usage errors through the program's exit override too.
  const inherit = (command: Command) => {
    for (const sub of command.commands) {
      sub.exitOverride().showHelpAfterError('(run with --help for usage)');
      inherit(sub);
    }
  };
  inherit(program);
  return program;
}

/** Runs the CLI on `argv` (without node and the script) and answers its exit code. */
export async function runCli(argv: readonly string[], environment: Environment): Promise<ExitCode> {
  const program = buildProgram(environment);
  const json = argv.includes('--json');
  const output = makeOutput({
    json,
    colorFlag: !argv.includes('--no-color'),
    isTTY: environment.isTTY,
    env: environment.env,
    ...(environment.write && { write: environment.write }),
    ...(environment.writeError && { writeError: environment.writeError }),
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version are answers, not errors; commander has printed the usage problem already.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof CliError || error instanceof ValidationError) {
      const code = error instanceof CliError ? error.exitCode : EXIT.failed;
      if (json) {
        output.error(
          JSON.stringify({
            error: {
              code: error.code,
              message: error.message,
              ...(error.details !== undefined && { details: error.details }),
            },
          }),
        );
        return code;
      }
      if (error instanceof ApiError) for (const line of issueLines(error.details)) output.error(`  ${line}`);
      const hint = error instanceof CliError && error.hint ? `; ${paint(output, 'dim', error.hint)}` : '';
      const kind = error instanceof ApiError ? `API error ${error.code}: ` : '';
      output.error(`${paint(output, 'red', 'capstan:')} ${kind}${error.message}${hint}`);
      return code;
    }
    const message = error instanceof CapstanError || error instanceof Error ? error.message : String(error);
    output.error(`capstan: unexpected error: ${message} (please report it with the command you ran)`);
    return EXIT.api;
  }
}

import { runCli } from './main.js';

// The entry point: the only place that reads the process's environment, argv and terminal.
const code = await runCli(process.argv.slice(2), {
  env: process.env,
  cwd: process.cwd(),
  isTTY: process.stdout.isTTY === true,
});
process.exitCode = code;

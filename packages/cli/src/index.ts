export { run, USAGE } from './cli.js';
export { AdminClient, CliError } from './client.js';
export { EXIT, exitFor, type ExitCode } from './exit.js';
export { DEFAULT_URL, type Io } from './context.js';

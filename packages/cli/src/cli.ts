import { CliError } from './client.js';
import { apply } from './commands/apply.js';
import { deadLetters } from './commands/dead-letters.js';
import { diff } from './commands/diff.js';
import { events } from './commands/events.js';
import { keys } from './commands/keys.js';
import { suspension } from './commands/tenants.js';
import { usage } from './commands/usage.js';
import { DEFAULT_URL, type Io } from './context.js';
import { EXIT } from './exit.js';

const USAGE = `holdfast: manage a Holdfast gateway through its edge's admin API

Usage:
  holdfast apply FILE [--replace] [--expected-version N] [--dry-run]
                                  validate a config file (YAML or JSON), then apply it: merged,
                                  so changes made through the admin API that the file leaves
                                  alone are kept (and listed); --replace drops them
  holdfast diff                    what the admin API changed since the last file applied
  holdfast keys create --tenant T --id ID [--use-case UC]
                                  create a virtual key; prints its secret once, on stdout
  holdfast keys list [--tenant T]  list keys (ids only; secrets are never shown again)
  holdfast keys delete --tenant T --id ID
  holdfast suspend TENANT [--reason TEXT] [--grace-ms N]
  holdfast resume TENANT
  holdfast usage [TENANT]          budget windows: used, held, limit
  holdfast events [--tenant T] [--type TYPE[,TYPE]] [--since 10m|TIME | --seq N | --all]
                  [--no-follow] [--count N] [--nats URL]
                                  the events on JetStream, one line each (--json: JSON lines
                                  {seq, subject, event}); follows until Ctrl-C, from now unless
                                  told; --no-follow stops at the end (and starts at the first)
  holdfast dead-letters [--last N] [--source NAME] [--nats URL]
                                  the newest messages any service parked (20 unless told),
                                  oldest first: reason, service, origin, body (--json: whole)

Every command takes --url URL and --json. The edge is --url, else $HOLDFAST_URL, else the
running \`pnpm stack\` (its stack.json in $HOLDFAST_STACK_DIR, default .tmp/stack), else
${DEFAULT_URL}. The admin token is $HOLDFAST_ADMIN_TOKEN (the edge's EDGE_ADMIN_TOKEN), else
the one \`pnpm stack\` keeps in its stack dir (admin-token). \`events\` and \`dead-letters\` read NATS at --nats,
else $NATS_URL, else the running stack's, else nats://127.0.0.1:4222.

Exit codes: 0 ok, 1 failed, 2 usage, 3 invalid config or request, 4 no or wrong admin token,
5 not found, 6 conflict (stale --expected-version, id taken), 7 edge, authority or NATS unavailable.
`;

/** Runs one command line; returns the exit code (never exits the process itself). */
export async function run(argv: string[], io: Io): Promise<number> {
  const [command, ...args] = argv;
  try {
    if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
      io.stdout(USAGE);
      return command === undefined ? EXIT.usage : EXIT.ok;
    }
    if (args.includes('--help') || args.includes('-h')) {
      io.stdout(USAGE);
      return EXIT.ok;
    }
    switch (command) {
      case 'apply':
        return await apply(args, io);
      case 'dead-letters':
        return await deadLetters(args, io);
      case 'diff':
        return await diff(args, io);
      case 'events':
        return await events(args, io);
      case 'keys':
        return await keys(args, io);
      case 'suspend':
      case 'resume':
        return await suspension(command, args, io);
      case 'usage':
        return await usage(args, io);
      default:
        throw new CliError(`unknown command "${command}"`, EXIT.usage);
    }
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    io.stderr(`holdfast: ${err.message}\n`);
    if (err.exit === EXIT.usage) io.stderr('run holdfast --help for usage\n');
    return err.exit;
  }
}

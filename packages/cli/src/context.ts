import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AdminClient, CliError } from './client.js';
import { EXIT } from './exit.js';

/** What the CLI touches outside itself; tests pass their own. */
export interface Io {
  env: NodeJS.ProcessEnv;
  stdout(text: string): void;
  stderr(text: string): void;
  readFile(path: string): Promise<string>;
  fetch?: typeof fetch;
}

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** Options every command takes. */
const COMMON = {
  url: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const satisfies ParseArgsConfig['options'];

type Options = NonNullable<ParseArgsConfig['options']>;

type Parsed<O extends Options> = ReturnType<
  typeof parseArgs<{
    args: string[];
    options: typeof COMMON & O;
    allowPositionals: true;
    strict: true;
  }>
>;

/** Parses a command's arguments (plus --url, --json, --help); a mistake is a usage error. */
export function parse<O extends Options>(args: string[], options: O): Parsed<O> {
  try {
    return parseArgs({
      args,
      options: { ...COMMON, ...options },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.usage);
  }
}

export interface Context {
  io: Io;
  json: boolean;
  /** The admin API client (HOLDFAST_URL / --url, HOLDFAST_ADMIN_TOKEN). */
  client(): AdminClient;
  /** Prints a result: as JSON with --json, else the human text. */
  print(value: unknown, human: string): void;
}

export function context(io: Io, values: { url?: string; json?: boolean }): Context {
  const json = values.json === true;
  return {
    io,
    json,
    client: () => {
      const token = io.env.HOLDFAST_ADMIN_TOKEN;
      if (!token) {
        throw new CliError(
          'set HOLDFAST_ADMIN_TOKEN to the edge admin token (EDGE_ADMIN_TOKEN)',
          EXIT.auth,
        );
      }
      return new AdminClient(values.url ?? io.env.HOLDFAST_URL ?? DEFAULT_URL, token, io.fetch);
    },
    print: (value, human) => io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : human),
  };
}

/** The one positional a command needs, or a usage error naming it. */
export function positional(positionals: string[], name: string): string {
  const [value, ...extra] = positionals;
  if (value === undefined) throw new CliError(`missing ${name}`, EXIT.usage);
  if (extra.length > 0) throw new CliError(`unexpected argument "${extra[0]}"`, EXIT.usage);
  return value;
}

/** A required --option, or a usage error naming it. */
export function required(value: string | undefined, name: string): string {
  if (value === undefined || value === '') throw new CliError(`missing --${name}`, EXIT.usage);
  return value;
}

import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { StackState } from '@holdfast/config';
import { AdminClient, CliError } from './client.js';
import { EXIT } from './exit.js';

/** What the CLI touches outside itself; tests pass their own. */
export interface Io {
  env: NodeJS.ProcessEnv;
  stdout(text: string): void;
  stderr(text: string): void;
  readFile(path: string): Promise<string>;
  fetch?: typeof fetch;
  /** The local `pnpm stack`, if any: where it runs and the admin token it keeps. */
  stack?: () => LocalStack;
  /** Calls `stop` on Ctrl-C or SIGTERM (commands that run until then: `events`). */
  onInterrupt?: (stop: () => void) => void;
}

export interface LocalStack {
  dir: string;
  /** Undefined when no stack runs from the dir. */
  state: StackState | undefined;
  adminToken: string | undefined;
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
  /** The local stack (see Io.stack); empty when there is none. */
  stack: LocalStack;
  /**
   * The admin API client: --url, else HOLDFAST_URL, else the running stack's edge, else
   * localhost; the token from HOLDFAST_ADMIN_TOKEN, else the one the stack keeps.
   */
  client(): AdminClient;
  /** Prints a result: as JSON with --json, else the human text. */
  print(value: unknown, human: string): void;
}

export function context(io: Io, values: { url?: string; json?: boolean }): Context {
  const json = values.json === true;
  const stack = io.stack?.() ?? { dir: '', state: undefined, adminToken: undefined };
  return {
    io,
    json,
    stack,
    client: () => {
      const token = io.env.HOLDFAST_ADMIN_TOKEN || stack.adminToken;
      if (!token) {
        const where = stack.dir
          ? `, or start \`pnpm stack\`, which keeps one in ${stack.dir}/admin-token`
          : '';
        throw new CliError(
          `no admin token: set HOLDFAST_ADMIN_TOKEN to the edge's EDGE_ADMIN_TOKEN${where}`,
          EXIT.auth,
        );
      }
      const url = values.url ?? io.env.HOLDFAST_URL ?? stack.state?.urls.edge ?? DEFAULT_URL;
      return new AdminClient(url, token, io.fetch);
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

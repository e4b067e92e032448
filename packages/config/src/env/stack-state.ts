import { readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/**
 * Where a running `pnpm stack` is, for the tools that talk to it (`holdfast`, the drift audit,
 * `pnpm experiment`): `<stack dir>/stack.json`, written once everything is ready and removed
 * on a clean stop, and `<stack dir>/admin-token`, the admin token the stack made for its edge.
 */

/** The repository's `.tmp/stack` (this file is packages/config/{src,dist}/stack-state.*). */
export const DEFAULT_STACK_DIR = fileURLToPath(new URL('../../../../.tmp/stack', import.meta.url));

/** The file in the stack dir that holds the edge's admin token (mode 0600). */
export const ADMIN_TOKEN_FILE = 'admin-token';

export const StackState = z.object({
  /** The runner's pid; its children are listed in `processes`. */
  pid: z.int(),
  startedAt: z.iso.datetime(),
  urls: z.object({
    edge: z.string(),
    mock: z.string(),
    nats: z.string(),
    redis: z.string(),
    clickhouse: z.string(),
    authorityOps: z.string(),
    aggregatorOps: z.string(),
    alerterOps: z.string(),
  }),
  /** The aggregator's ClickHouse database. */
  clickhouseDatabase: z.string(),
  /** NATS names the services use (HOLDFAST_EVENTS_STREAM, ..._PREFIX, HOLDFAST_AUTHORITY_PREFIX). */
  natsNames: z.record(z.string(), z.string()),
  configPath: z.string(),
  processes: z.array(z.object({ name: z.string(), pid: z.int() })),
});
export type StackState = z.infer<typeof StackState>;

/**
 * The stack dir a command means: HOLDFAST_STACK_DIR (relative to where the user typed the
 * command: pnpm runs scripts in the package dir and says where in INIT_CWD), else the default.
 */
export function stackDir(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.HOLDFAST_STACK_DIR;
  if (!given) return DEFAULT_STACK_DIR;
  return isAbsolute(given) ? given : resolve(env.INIT_CWD ?? process.cwd(), given);
}

export function stateFile(dir: string): string {
  return join(dir, 'stack.json');
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is just not ours.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The last state written in `dir` (its runner may be gone), or undefined. */
export function readStackStateFile(dir: string): StackState | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(stateFile(dir), 'utf8'));
  } catch {
    return undefined;
  }
  const parsed = StackState.safeParse(raw);
  return parsed.success ? parsed.data : undefined;
}

/** The state of a stack whose runner is still alive, or undefined. */
export function readStackState(dir: string): StackState | undefined {
  const state = readStackStateFile(dir);
  return state && isAlive(state.pid) ? state : undefined;
}

/** The admin token the stack keeps in `dir`, or undefined. */
export function readAdminToken(dir: string): string | undefined {
  try {
    return readFileSync(join(dir, ADMIN_TOKEN_FILE), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Connection variables of the running stack for what `env` leaves unset: NATS_URL,
 * CLICKHOUSE_URL, CLICKHOUSE_DATABASE and the NATS names. Spread `env` over the result, so a
 * variable the user set always wins. Empty when no stack runs from the stack dir.
 */
export function stackEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const state = readStackState(stackDir(env));
  if (!state) return {};
  return {
    NATS_URL: state.urls.nats,
    CLICKHOUSE_URL: state.urls.clickhouse,
    CLICKHOUSE_DATABASE: state.clickhouseDatabase,
    ...state.natsNames,
  };
}

import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * `<stack dir>/stack.json`, written once everything is ready and removed on a clean stop:
 * where a running `pnpm stack` is, so `pnpm experiment` and scripts find it without flags.
 */
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

export function stateFile(dir: string): string {
  return join(dir, 'stack.json');
}

export async function writeStackState(dir: string, state: StackState): Promise<void> {
  await writeFile(stateFile(dir), `${JSON.stringify(state, null, 2)}\n`);
}

export async function removeStackState(dir: string): Promise<void> {
  await rm(stateFile(dir), { force: true });
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

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is just not ours.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

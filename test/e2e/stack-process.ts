import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { readStackState, REPO_ROOT, type StackState } from '@holdfast/stack';
import { freePort, waitFor } from '@holdfast/testkit';

const STACK_MAIN = resolve(REPO_ROOT, 'infra/stack/dist/main.js');

/** Variables of the caller that would change what the stack starts or calls. */
const STRIPPED = ['NATS_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL'];

export interface StackProcess {
  child: ChildProcess;
  /** Every line the runner printed (its own and its children's, prefixed). */
  lines: string[];
  state: StackState;
  dir: string;
  exited: Promise<number | NodeJS.Signals>;
  /** Ctrl-C: SIGINT to the runner, then wait for it to exit. */
  interrupt(): Promise<number | NodeJS.Signals>;
  /** Stops the runner if it still runs and removes its data dir (unless the caller gave it). */
  cleanup(): Promise<void>;
}

/**
 * Runs `pnpm stack`'s runner as a real child process on free service ports with its own data
 * dir, and waits for its summary. `env` adds variables (infra URLs, NATS names, ...). With
 * `o.dir` it runs from that data dir (a restart) and leaves the dir to the caller.
 */
export async function startStackProcess(
  env: Record<string, string> = {},
  o: { dir?: string } = {},
): Promise<StackProcess> {
  const dir = o.dir ?? (await mkdtemp(join(tmpdir(), 'holdfast-stack-')));
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !STRIPPED.includes(k)),
  );
  const child = spawn(process.execPath, [STACK_MAIN], {
    env: {
      ...base,
      HOLDFAST_STACK_DIR: dir,
      EDGE_PORT: String(await freePort()),
      MOCK_UPSTREAM_PORT: String(await freePort()),
      AUTHORITY_OPS_PORT: String(await freePort()),
      BILLING_AGGREGATOR_OPS_PORT: String(await freePort()),
      ALERTER_OPS_PORT: String(await freePort()),
      NO_COLOR: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (l) => lines.push(l));
  createInterface({ input: child.stderr }).on('line', (l) => lines.push(l));
  const exited = new Promise<number | NodeJS.Signals>((done) =>
    child.once('exit', (code, signal) => done(signal ?? code ?? 0)),
  );
  let gone = false;
  void exited.then(() => (gone = true));
  const cleanup = async () => {
    if (!gone) child.kill('SIGINT');
    await exited;
    if (!o.dir) await rm(dir, { recursive: true, force: true });
  };
  const running = () => lines.some((l) => l.startsWith('Holdfast is running'));
  try {
    await waitFor(() => gone || running(), {
      timeoutMs: 120_000,
      intervalMs: 100,
      what: 'the stack to be running',
    });
    if (!running()) throw new Error('the stack exited');
  } catch (err) {
    await cleanup();
    // The services' own lines say why one failed; the NATS and Redis servers' would bury them.
    throw new Error(
      `${(err as Error).message}\n${lines
        .filter((l) => !/^nats-|^redis-/.test(l))
        .slice(-60)
        .join('\n')}`,
    );
  }
  const state = readStackState(dir);
  if (!state) throw new Error(`no stack.json in ${dir}`);
  return {
    child,
    lines,
    state,
    dir,
    exited,
    interrupt: async () => {
      child.kill('SIGINT');
      return exited;
    },
    cleanup,
  };
}

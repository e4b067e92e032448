/**
 * A Redis under valgrind's callgrind, for bench:scripts' BENCH_CALLGRIND=1: instructions are
 * counted, not timed, so the same scripts give the same figure on a busy box (within ~1%),
 * and two versions of a script can be compared across runs and days. Only the command
 * handlers' inclusive counts are read (the Lua, the commands it runs, the reply; not the
 * network or the parsing), by symbol: Debian's stripped redis-server still exports them.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBinary, freePort, waitFor } from '@holdfast/testkit/infra';
import { Redis } from 'ioredis';

/** The handlers of the script commands, by command. */
const HANDLERS = { evalsha: 'evalShaCommand', fcall: 'fcallCommand' } as const;
export type ScriptCommand = keyof typeof HANDLERS;

export interface CallgrindRedis {
  url: string;
  /** Zeroes the counters (before a phase). */
  zero(): void;
  /** Instructions spent in each script command's handler since zero(). */
  read(): Record<ScriptCommand, number>;
  stop(): Promise<void>;
}

function tool(name: string): string {
  const bin = findBinary(name);
  if (!bin) throw new Error(`${name} is not on PATH: apt-get install -y valgrind redis-server`);
  return bin;
}

export async function startCallgrindRedis(): Promise<CallgrindRedis> {
  const [valgrind, control, annotate, redis] = [
    'valgrind',
    'callgrind_control',
    'callgrind_annotate',
    'redis-server',
  ].map(tool) as [string, string, string, string];
  const dir = mkdtempSync(join(tmpdir(), 'holdfast-callgrind-'));
  const port = await freePort();
  const child = spawn(
    valgrind,
    [
      '--tool=callgrind',
      `--callgrind-out-file=${join(dir, 'cg.out')}`,
      redis,
      // redis-server's own: its port, nothing on disk.
      ...['--port', String(port), '--save', '', '--appendonly', 'no'],
    ],
    { cwd: dir, stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const ping = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  ping.on('error', () => undefined);
  await waitFor(
    () =>
      ping.connect().then(
        () => true,
        () => {
          // A failed first connect leaves the client reconnecting on its own, and every later
          // connect() is refused ("already connecting/connected") even once the server
          // answers: start each try afresh (a Redis under valgrind on a busy box can take
          // minutes to listen, and the bench waited out its 5 minutes).
          ping.disconnect();
          return false;
        },
      ),
    { timeoutMs: 300_000, what: `redis-server under callgrind on ${port}` },
  );
  ping.disconnect();
  const pid = String(child.pid);
  const run = (bin: string, args: string[]) => {
    const r = spawnSync(bin, args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${bin} ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  return {
    url,
    zero: () => void run(control, ['-z', pid]),
    read: () => {
      run(control, ['-d', pid]);
      const dumps = readdirSync(dir).filter((f) => /^cg\.out\.\d+$/.test(f));
      const last = dumps.sort((a, b) => Number(a.split('.')[2]) - Number(b.split('.')[2])).pop();
      if (!last) throw new Error('callgrind wrote no dump');
      const text = run(annotate, ['--inclusive=yes', '--threshold=100', join(dir, last)]);
      const count = (fn: string) => {
        const m = new RegExp(`^\\s*([\\d,]+)\\s+\\([^)]*\\)\\s+\\S*:${fn}\\b`, 'm').exec(text);
        return m ? Number(m[1]!.replaceAll(',', '')) : 0;
      };
      return { evalsha: count(HANDLERS.evalsha), fcall: count(HANDLERS.fcall) };
    },
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

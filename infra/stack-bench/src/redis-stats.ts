import { Redis } from 'ioredis';

/** One command's line of `INFO commandstats`. */
export interface CommandStat {
  calls: number;
  usec: number;
}

/** Time per script, from a SLOWLOG sample (every command logged while a phase runs). */
interface ScriptStat {
  /** Calls of that script in the sample. */
  samples: number;
  /** Mean execution time in µs (the same clock as `INFO commandstats`), its commands included. */
  usecPerCall: number;
  /** Redis commands the script ran per call (`redis.call`), and their time: the rest is Lua. */
  commandsPerCall: number;
  commandsUsecPerCall: number;
}

/** What a SLOWLOG sample says: per script, and which commands clients sent themselves. */
export interface SlowlogSample {
  scripts: Record<string, ScriptStat>;
  /** Commands sent by clients, as opposed to called from inside a script. */
  topLevel: string[];
}

/** `cmdstat_fcall:calls=10,usec=1570,usec_per_call=157.00,...` lines, by command. */
export function parseCommandStats(info: string): Record<string, CommandStat> {
  const out: Record<string, CommandStat> = {};
  for (const line of info.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
    if (m) out[m[1]!] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  return out;
}

/**
 * The script a command runs: the authority's scripts are Redis Functions named
 * `hf_<script>_<hash of the library>` (services/budget-authority/src/scripts.ts), called by
 * FCALL; an EVALSHA (another tool, or an authority of an older version) shows as
 * `sha:<first 8 hex>`. Not a script: undefined.
 */
export function scriptOf(args: readonly string[]): string | undefined {
  const command = (args[0] ?? '').toLowerCase();
  if (command === 'fcall' || command === 'fcall_ro') {
    const fn = args[1] ?? '';
    return /^hf_(.+)_[0-9a-f]{12}$/.exec(fn)?.[1] ?? `fn:${fn}`;
  }
  if (command === 'evalsha') return `sha:${(args[1] ?? '').slice(0, 8)}`;
  if (command === 'eval') return 'eval';
  return undefined;
}

/** `SLOWLOG GET` entry: id, unix time, µs, argv, client address, client name. */
type SlowlogEntry = [
  id: number,
  at: number,
  usec: number,
  args: string[],
  addr: string,
  ...rest: unknown[],
];

/** Redis 7 logs the commands a script runs as client `?:0`, just before the script itself. */
const SCRIPT_CLIENT = '?:0';
const OURS = new Set(['slowlog', 'config', 'info']);

/**
 * Groups a SLOWLOG sample by script (named by scriptOf): each script's time, and the
 * commands it ran, which Redis logs right before it (one thread: nothing interleaves). The
 * oldest group may be cut by the log's length, so everything up to the first command sent by
 * a client is skipped.
 */
export function slowlogSample(entries: readonly SlowlogEntry[]): SlowlogSample {
  const sorted = [...entries].sort((a, b) => a[0] - b[0]);
  const sums: Record<string, { n: number; usec: number; inner: number; innerUsec: number }> = {};
  const topLevel = new Map<string, number>();
  let inner = { n: 0, usec: 0 };
  let complete = false;
  for (const [, , usec, args, addr] of sorted) {
    const command = (args[0] ?? '').toLowerCase();
    if (addr === SCRIPT_CLIENT) {
      inner = { n: inner.n + 1, usec: inner.usec + usec };
      continue;
    }
    const group = inner;
    inner = { n: 0, usec: 0 };
    if (!complete || OURS.has(command)) {
      complete = true;
      continue;
    }
    topLevel.set(command, (topLevel.get(command) ?? 0) + 1);
    const key = scriptOf(args);
    if (!key) continue;
    const s = (sums[key] ??= { n: 0, usec: 0, inner: 0, innerUsec: 0 });
    s.n += 1;
    s.usec += usec;
    s.inner += group.n;
    s.innerUsec += group.usec;
  }
  return {
    scripts: Object.fromEntries(
      Object.entries(sums).map(([k, s]) => [
        k,
        {
          samples: s.n,
          usecPerCall: s.usec / s.n,
          commandsPerCall: s.inner / s.n,
          commandsUsecPerCall: s.innerUsec / s.n,
        },
      ]),
    ),
    topLevel: [...topLevel.keys()].sort(),
  };
}

/** The stack's Redis, as the bench reads it: reset before a phase, read after. */
export class RedisStats {
  readonly #redis: Redis;

  constructor(
    url: string,
    private readonly slowlogSize: number,
  ) {
    this.#redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  }

  async connect(): Promise<void> {
    await this.#redis.connect();
  }

  /** Zeroes commandstats and starts logging every command (threshold 0) into the slowlog. */
  async reset(): Promise<void> {
    await this.#redis.config('SET', 'slowlog-max-len', String(this.slowlogSize));
    await this.#redis.config('SET', 'slowlog-log-slower-than', '0');
    await this.#redis.slowlog('RESET');
    await this.#redis.config('RESETSTAT');
  }

  /**
   * commandstats since reset(), only the commands clients sent (Redis 7 also counts the ones
   * scripts run, whose time is already in the script's), and the per-script sample.
   */
  async read(): Promise<{ commands: Record<string, CommandStat> } & SlowlogSample> {
    const commands = parseCommandStats(await this.#redis.info('commandstats'));
    const entries = (await this.#redis.slowlog('GET', this.slowlogSize)) as SlowlogEntry[];
    // Back to Redis's default, so phases that do not measure Redis do not pay for the log.
    await this.#redis.config('SET', 'slowlog-log-slower-than', '10000');
    const sample = slowlogSample(entries);
    const sent = Object.fromEntries(
      Object.entries(commands).filter(([c]) => sample.topLevel.includes(c.split('|')[0]!)),
    );
    return { commands: sent, ...sample };
  }

  async close(): Promise<void> {
    await this.#redis.quit();
  }
}

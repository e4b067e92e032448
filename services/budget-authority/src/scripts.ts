import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ChainableCommander } from 'ioredis';
import { durably } from './durable.js';
import { masters, type RedisClient } from './redis.js';

/** Lua sources live in src/lua; this path works from src/ (tests) and dist/ (built). */
const LUA_DIR = new URL('../src/lua/', import.meta.url);

const SCRIPTS = [
  'admit',
  'extend',
  'close',
  'renew',
  'suspension',
  'usage',
  'refusals',
  'capacity',
  'refuse',
  'apply',
  'claim',
  'unclaim',
  'migrate',
  'move',
  'retry',
] as const;
type ScriptName = (typeof SCRIPTS)[number];

/**
 * The scripts as one Redis Functions library: lib.lua's helpers are defined once when the
 * library loads, not on every call as EVAL would (each script used to be lib.lua + itself).
 * Each script's text runs as a function's body, KEYS and ARGV being upvalues the function sets
 * first (Redis runs one function at a time); a script's part above a line `-- @call` runs once,
 * at load (splitScript). The library's and functions'
 * names carry a hash of the code, so authorities of two versions can share a Redis during a
 * rolling deploy, each calling its own.
 */
export interface Library {
  name: string;
  code: string;
  functions: Record<ScriptName, string>;
}

/** The line that ends a script's part run once, when the library loads (see splitScript). */
const CALL_MARKER = '\n-- @call\n';

/**
 * A script's text before a line `-- @call` is run once, when the library loads: the functions
 * its body calls (a function defined in the body is a new closure, with new upvalues, on every
 * call). The rest, or the whole text without that line, is the function's body.
 */
function splitScript(text: string): [once: string, body: string] {
  const at = text.indexOf(CALL_MARKER);
  if (at < 0) return ['', text];
  return [text.slice(0, at + 1), text.slice(at + CALL_MARKER.length)];
}

export function buildLibrary(dir: URL = LUA_DIR): Library {
  const read = (file: string) => readFileSync(new URL(file, dir), 'utf8');
  const lib = read('lib.lua');
  const bodies = SCRIPTS.map((name) => [name, read(`${name}.lua`)] as const);
  const hash = createHash('sha1')
    .update(lib)
    .update(bodies.map(([n, b]) => `${n}\n${b}`).join('\n'))
    .digest('hex')
    .slice(0, 12);
  const functions = Object.fromEntries(
    SCRIPTS.map((name) => [name, `hf_${name}_${hash}`]),
  ) as Record<ScriptName, string>;
  const registered = bodies.map(([name, text]) => {
    const [once, body] = splitScript(text);
    return (
      `${once}redis.register_function('${functions[name]}', function(keys, args)\n` +
      `KEYS, ARGV = keys, args\n${body}\nend)\n`
    );
  });
  const name = `holdfast_${hash}`;
  return {
    name,
    code: `#!lua name=${name}\nlocal KEYS, ARGV\n${lib}\n${registered.join('')}`,
    functions,
  };
}

const LIBRARY = buildLibrary();

/** The library this code calls (names by script), for tools that read Redis's own stats. */
export const scriptLibrary = (): Library => LIBRARY;

/** Loads the library on every master (replicas get it by replication). Idempotent. */
export async function loadScripts(redis: RedisClient): Promise<void> {
  await Promise.all(
    masters(redis).map((node) =>
      node.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY.code).catch((err: unknown) => {
        const { host, port } = node.options;
        throw new Error(`loading the scripts on Redis ${host}:${port}: ${String(err)}`, {
          cause: err,
        });
      }),
    ),
  );
}

const reloading = new WeakMap<RedisClient, Promise<void>>();

/** One reload at a time per connection, however many calls found the library missing. */
function reload(redis: RedisClient): Promise<void> {
  let p = reloading.get(redis);
  if (!p) {
    p = loadScripts(redis).finally(() => reloading.delete(redis));
    reloading.set(redis, p);
  }
  return p;
}

const isMissing = (err: unknown): boolean =>
  err instanceof Error && /Function not found/i.test(err.message);
const isUnknownPlan = (err: unknown): boolean =>
  err instanceof Error && err.message.startsWith('NOPLAN');

/**
 * Calls a script: `once(full)` with a plan sent by reference first. A Redis that lost the
 * library (restarted without persistence, flushed, a new cluster node) gets it loaded again,
 * and one that does not hold the call's plan (NOPLAN) gets it in full; either way the call is
 * made once more. A call that found no function or no plan changed nothing (readPlan is every
 * plan script's first step), so the retry cannot apply it twice.
 */
async function call<T>(redis: RedisClient, once: (full: boolean) => Promise<T>): Promise<T> {
  let full = false;
  let reloaded = false;
  for (;;) {
    try {
      return await once(full);
    } catch (err) {
      if (isMissing(err) && !reloaded) {
        reloaded = true;
        // A library loaded again keeps no plans.
        full = true;
        await reload(redis);
      } else if (isUnknownPlan(err) && !full) {
        full = true;
      } else {
        throw err;
      }
    }
  }
}

const fcall = (
  c: RedisClient | ChainableCommander,
  name: ScriptName,
  keys: string[],
  args: string[],
) => c.fcall(LIBRARY.functions[name], keys.length, ...keys, ...args);

/** The arguments a plan script ends with (script-args.ts Plan.args). */
export interface PlanArgs {
  args(full: boolean): string[];
}

/**
 * Runs one of the library's scripts. `durable`: a write answered only once the replicas asked
 * for have it (durable.ts). `plan`: its arguments follow `args`.
 */
function script<T>(
  redis: RedisClient,
  name: ScriptName,
  keys: string[],
  args: string[],
  durable: boolean,
  plan?: PlanArgs,
): Promise<T> {
  return call(redis, (full) => {
    const argv = plan ? [...args, ...plan.args(full)] : args;
    const once = () => fcall(redis, name, keys, argv) as Promise<T>;
    return durable ? durably(redis, once, (p) => void fcall(p, name, keys, argv)) : once();
  });
}

/**
 * Runs a script with its keys and its spec: JSON text as ARGV[1], or (admit and close, run on
 * every call) positional strings followed by the plan's. Every one but usage writes (usage
 * only reads).
 */
export function run(
  redis: RedisClient,
  name: 'admit' | 'extend' | 'close' | 'renew' | 'suspension' | 'usage',
  keys: string[],
  spec: string | string[],
  plan?: PlanArgs,
): Promise<string[]> {
  const args = typeof spec === 'string' ? [spec] : spec;
  return script(redis, name, keys, args, name !== 'usage', plan);
}

/** Runs capacity.lua over an upstream's scopes and one reservation's record. */
export function runCapacity(redis: RedisClient, keys: string[], spec: string): Promise<string[]> {
  return script(redis, 'capacity', keys, [spec], false);
}

/** Compares and sets the upstream a hold's capacity is on (lua/move.lua). */
export function runMove(redis: RedisClient, keys: string[], args: string[]): Promise<string[]> {
  return script(redis, 'move', keys, args, true);
}

/** Whether a hold may take a request for a retry (lua/retry.lua). */
export function runRetry(redis: RedisClient, keys: string[], args: string[]): Promise<string[]> {
  return script(redis, 'retry', keys, args, false);
}

/** Records a refusal decided before any budget is read, rate limited (lua/refuse.lua). */
export function runRefuse(redis: RedisClient, keys: string[], spec: string): Promise<number> {
  return script(redis, 'refuse', keys, [spec], true);
}

/** Writes up to `eventIds.length` kinds of rate-limited refusals of an org; returns how many. */
export function flushRefusals(
  redis: RedisClient,
  outbox: string,
  summaries: string,
  eventIds: string[],
): Promise<number> {
  return script(redis, 'refusals', [outbox, summaries], eventIds, false);
}

/** A config apply's one atomic write (lua/apply.lua): the version after it, or -1. */
export function runApply(redis: RedisClient, keys: string[], args: string[]): Promise<number> {
  return script(redis, 'apply', keys, args, true);
}

/** Takes or renews a relay lease (lua/claim.lua): 1 when `owner` holds it now. */
export function claimLease(
  redis: RedisClient,
  lock: string,
  owner: string,
  leaseMs: number,
): Promise<number> {
  return script(redis, 'claim', [lock], [owner, String(leaseMs)], false);
}

/** Drops a relay lease if `owner` still holds it (lua/unclaim.lua). */
export function unclaimLease(redis: RedisClient, lock: string, owner: string): Promise<number> {
  return script(redis, 'unclaim', [lock], [owner], false);
}

/** Renames each old key of `pairs` (old, new, ...) unless the new one exists; how many moved. */
export function moveKeys(redis: RedisClient, pairs: string[]): Promise<number> {
  return script(redis, 'migrate', pairs, [], false);
}

/**
 * Runs a script until it has every key it touches in KEYS: one that finds it needs keys its
 * KEYS lack (a hold's record on other levels or windows than the plan's) returns
 * `['keys', ...]` before it changes anything (lib.lua `undeclared`), and runs again with them
 * added. The second run asks for all it needs, so a third asking is a bug, unless `askings`
 * says how many a script may make (admit's adoption walk: keys it can name only once it reads
 * the ones it asked for first). With `lastAsking: 'return'`, a script still asking after them
 * (other admissions moved the walk on meanwhile) has its `['keys', ...]` returned, not thrown.
 */
export async function withDeclared<E>(
  once: (
    extra: readonly string[],
  ) => Promise<{ ok: true; value: string[] } | { ok: false; error: E }>,
  { askings = 2, lastAsking = 'throw' }: { askings?: number; lastAsking?: 'throw' | 'return' } = {},
): Promise<{ ok: true; value: string[] } | { ok: false; error: E }> {
  let extra: string[] = [];
  for (let round = 0; ; round++) {
    const r = await once(extra);
    if (!r.ok || r.value[0] !== 'keys') return r;
    if (round === askings) {
      if (lastAsking === 'return') return r;
      throw new Error(`a script still lacks keys: ${r.value.slice(1).join(' ')}`);
    }
    extra = [...new Set([...extra, ...r.value.slice(1)])];
  }
}

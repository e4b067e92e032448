import { readFileSync } from 'node:fs';
import type { Redis, Result } from 'ioredis';

/** Lua sources live in src/lua; this path works from src/ (tests) and dist/ (built). */
const LUA_DIR = new URL('../src/lua/', import.meta.url);

function source(name: string): string {
  const lib = readFileSync(new URL('lib.lua', LUA_DIR), 'utf8');
  return `${lib}\n${readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8')}`;
}

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
] as const;
type ScriptName = (typeof SCRIPTS)[number];

const COMMANDS = {
  admit: 'hfAdmit',
  extend: 'hfExtend',
  close: 'hfClose',
  renew: 'hfRenew',
  suspension: 'hfSuspension',
  usage: 'hfUsage',
  refusals: 'hfRefusals',
  capacity: 'hfCapacity',
  refuse: 'hfRefuse',
} as const satisfies Record<ScriptName, string>;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** See lua/admit.lua. */
    hfAdmit(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
    /** See lua/extend.lua. */
    hfExtend(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
    /** See lua/close.lua. */
    hfClose(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
    /** See lua/renew.lua. */
    hfRenew(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
    /** See lua/refusals.lua. */
    hfRefusals(numKeys: number, ...keysAndIds: string[]): Result<number, Context>;
    /** See lua/capacity.lua. */
    hfCapacity(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
    /** See lua/refuse.lua. */
    hfRefuse(numKeys: number, ...keysAndSpec: string[]): Result<number, Context>;
    /** See lua/suspension.lua. */
    hfSuspension(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
    /** See lua/usage.lua. */
    hfUsage(numKeys: number, ...keysAndSpec: string[]): Result<string[], Context>;
  }
}

/** Registers every script on a connection (EVALSHA, falling back to EVAL once per script). */
export function defineScripts(redis: Redis): void {
  for (const name of SCRIPTS) {
    redis.defineCommand(COMMANDS[name], { lua: source(name) });
  }
}

/**
 * Runs a script with its keys and its spec: JSON text as ARGV[1], or (admit and close, run on
 * every call) positional strings.
 */
export function run(
  redis: Redis,
  name: Exclude<ScriptName, 'refusals' | 'capacity' | 'refuse'>,
  keys: string[],
  spec: string | string[],
): Promise<string[]> {
  const args = typeof spec === 'string' ? [...keys, spec] : [...keys, ...spec];
  switch (name) {
    case 'admit':
      return redis.hfAdmit(keys.length, ...args);
    case 'extend':
      return redis.hfExtend(keys.length, ...args);
    case 'close':
      return redis.hfClose(keys.length, ...args);
    case 'renew':
      return redis.hfRenew(keys.length, ...args);
    case 'suspension':
      return redis.hfSuspension(keys.length, ...args);
    case 'usage':
      return redis.hfUsage(keys.length, ...args);
  }
}

/** Runs capacity.lua over an upstream's scopes and one reservation's record. */
export function runCapacity(redis: Redis, keys: string[], spec: string): Promise<string[]> {
  return redis.hfCapacity(keys.length, ...keys, spec);
}

/** Records a refusal decided before any budget is read, rate limited (lua/refuse.lua). */
export function runRefuse(redis: Redis, keys: string[], spec: string): Promise<number> {
  return redis.hfRefuse(keys.length, ...keys, spec);
}

/** Writes up to `eventIds.length` kinds of rate-limited refusals of an org; returns how many. */
export function flushRefusals(
  redis: Redis,
  outbox: string,
  summaries: string,
  eventIds: string[],
): Promise<number> {
  return redis.hfRefusals(2, outbox, summaries, ...eventIds);
}

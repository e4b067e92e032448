import { readFileSync } from 'node:fs';
import type { Result } from 'ioredis';
import { durably } from './durable.js';
import type { RedisClient } from './redis.js';

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
export function defineScripts(redis: RedisClient): void {
  for (const name of SCRIPTS) {
    redis.defineCommand(COMMANDS[name], { lua: source(name) });
  }
}

/**
 * Runs a script with its keys and its spec: JSON text as ARGV[1], or (admit and close, run on
 * every call) positional strings. A script that writes is answered only once the replicas
 * asked for have it (durable.ts); usage only reads.
 */
export function run(
  redis: RedisClient,
  name: Exclude<ScriptName, 'refusals' | 'capacity' | 'refuse'>,
  keys: string[],
  spec: string | string[],
): Promise<string[]> {
  const args = typeof spec === 'string' ? [...keys, spec] : [...keys, ...spec];
  if (name === 'usage') return redis.hfUsage(keys.length, ...args);
  const command = COMMANDS[name];
  return durably(
    redis,
    () => redis[command](keys.length, ...args),
    (p) => void p[command](keys.length, ...args),
  );
}

/** Runs capacity.lua over an upstream's scopes and one reservation's record. */
export function runCapacity(redis: RedisClient, keys: string[], spec: string): Promise<string[]> {
  return redis.hfCapacity(keys.length, ...keys, spec);
}

/** Records a refusal decided before any budget is read, rate limited (lua/refuse.lua). */
export function runRefuse(redis: RedisClient, keys: string[], spec: string): Promise<number> {
  return durably(
    redis,
    () => redis.hfRefuse(keys.length, ...keys, spec),
    (p) => void p.hfRefuse(keys.length, ...keys, spec),
  );
}

/** Writes up to `eventIds.length` kinds of rate-limited refusals of an org; returns how many. */
export function flushRefusals(
  redis: RedisClient,
  outbox: string,
  summaries: string,
  eventIds: string[],
): Promise<number> {
  return redis.hfRefusals(2, outbox, summaries, ...eventIds);
}

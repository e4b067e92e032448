import type { Redis } from 'ioredis';
import { buildLibrary } from '../src/scripts.js';

/**
 * Where each command the scripts call names its keys (1 the first argument, 2 the first two,
 * -1 every argument, 0 none). A command missing here fails the call: a new one is added with
 * its key positions, not let through unchecked.
 */
const KEY_ARGS = `{HSET = 1, HMGET = 1, HINCRBY = 1, HGET = 1, HDEL = 1, HGETALL = 1, ZADD = 1,
  ZCARD = 1, ZCOUNT = 1, ZREM = 1, ZRANGE = 1, ZSCORE = 1, ZREMRANGEBYSCORE = 1,
  ZREMRANGEBYRANK = 1, XADD = 1, SET = 1, GET = 1, INCR = 1, SADD = 1, PTTL = 1, PEXPIRE = 1,
  LTRIM = 1, LRANGE = 1, LPUSH = 1, RENAME = 2, COPY = 2, DEL = -1, EXISTS = -1, TIME = 0}`;

/**
 * Our own detector of undeclared keys (Redis checks only that a script's keys are in one slot:
 * on a cluster node an undeclared key of the declared slot passes, until that slot migrates).
 * Declared before the library's `local redis`, these functions reach Redis's own `redis` at
 * call time; the library's code (lib.lua and every script) sees the checking one.
 */
const DETECTOR = `local function checkedCall(cmd, ...)
  local n = (${KEY_ARGS})[string.upper(cmd)]
  if not n then
    error('UNCHECKED command ' .. cmd .. ': add its key positions to declared-keys.ts')
  end
  local args = {...}
  if n < 0 then
    n = #args
  end
  for i = 1, n do
    local declared = false
    for j = 1, #KEYS do
      if KEYS[j] == args[i] then
        declared = true
        break
      end
    end
    if not declared then
      error('UNDECLARED key ' .. tostring(args[i]) .. ' (' .. cmd .. ')')
    end
  end
  return redis.call(cmd, ...)
end
local function sha1hex(text)
  return redis.sha1hex(text)
end
local redis = {call = checkedCall, sha1hex = sha1hex, register_function = redis.register_function}
`;

/**
 * The authority's library (same names: the authority calls it unknowing) with every
 * redis.call checked: a key not in KEYS fails the script with `UNDECLARED key <name>`.
 */
function keyCheckedLibrary(): string {
  const { code } = buildLibrary();
  const header = 'local KEYS, ARGV\n';
  const at = code.indexOf(header);
  if (at < 0) throw new Error('the library has no `local KEYS, ARGV` line to follow');
  const end = at + header.length;
  return `${code.slice(0, end)}${DETECTOR}${code.slice(end)}`;
}

/** Replaces the authority's library on `redis` with the checked one (after the authority loaded its own). */
export async function loadKeyChecked(redis: Redis): Promise<void> {
  await redis.call('FUNCTION', 'LOAD', 'REPLACE', keyCheckedLibrary());
}

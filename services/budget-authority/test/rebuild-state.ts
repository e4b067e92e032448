import { windowBounds, type BudgetWindow } from '@holdfast/events';
import type { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import type { RedisClient } from '../src/redis.js';

/**
 * The budget state under the prefix as of `now`, in a form a rebuild must reproduce to the
 * token: every window's buckets still inside it (a calendar month's by its `lo`), held and
 * overrun fields; the state hashes' lifetime totals, suspension owners and overruns; the
 * in-flight sets, lease indexes and end-user registries; the live holds' records; the upstream
 * capacity windows' buckets still in the minute (an upstream's, a model's, a tenant's own) and
 * the capacity records of calls taken in the last 2 minutes. Left out: what no event records
 * (outboxes, relay locks, refusal counts not yet evented, a provider's 429 or remaining-tokens
 * report on a capacity window, the counting endpoint's window) and the records of closed
 * reservations (docs/operations.md says why).
 */
export async function budgetState(
  redis: RedisClient,
  keys: Keys,
  now: number,
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const skipped = /:(outbox|relay|refusals)$|\}:rr:|^[^{]*\{cap:[^}]*\}:c:w/;
  for (const key of (await stateKeys(redis, keys)).sort()) {
    if (skipped.test(key)) continue;
    const type = await redis.type(key);
    if (/^[^{]*\{cap:/.test(key)) {
      const c = capacity(await redis.hgetall(key), now);
      if (c) out[key] = c;
    } else if (type === 'zset') {
      const raw = await redis.zrange(key, 0, -1, 'WITHSCORES');
      out[key] = raw;
    } else if (type === 'list') {
      out[key] = await redis.lrange(key, 0, -1);
    } else if (type === 'hash') {
      const h = await redis.hgetall(key);
      if (key.includes(':w:')) {
        const window = key.slice(key.lastIndexOf(':w:') + 3).split('-')[0] as BudgetWindow;
        const calendar = window === 'month' && Number(h.lo) < 100_000;
        const { startBucket } = windowBounds(window, now, calendar);
        const buckets = Object.entries(h)
          .filter(([f, v]) => f.startsWith('b') && Number(f.slice(1)) >= startBucket && v !== '0')
          .sort();
        const w = { calendar, h: Number(h.h ?? 0), p: Number(h.p ?? 0), buckets };
        if (w.h !== 0 || w.p !== 0 || buckets.length > 0) out[key] = w;
      } else if (key.endsWith(':state')) {
        const kept = Object.entries(h).filter(
          ([f, v]) =>
            /^(billed[TU]|over[NTU]|overAt|so:.*)$/.test(f) ||
            (f === 'suspended' && v === '1') ||
            false,
        );
        const live = kept.filter(([f, v]) => !(/^(billed|over)/.test(f) && v === '0'));
        if (live.length > 0) out[key] = Object.fromEntries(live.sort());
      } else if (/\}:r:/.test(key)) {
        if (h.state !== 'held') continue;
        out[key] = record(h);
      } else out[key] = h;
    } else out[key] = type;
  }
  return out;
}

/**
 * A capacity window's buckets still in the minute at `now` (capacity.lua: `t<second>`,
 * `r<second>`), or a capacity record's fields; undefined when nothing is left in it.
 */
function capacity(h: Record<string, string>, now: number): Record<string, unknown> | undefined {
  if (h.bucket !== undefined) {
    const { bucket, tokens, scopes, tenant = '0' } = h;
    return { bucket, tokens, scopes, tenant };
  }
  const oldest = Math.floor(now / 1000) - 59;
  const buckets = Object.entries(h)
    .filter(([f, v]) => /^[tr]\d+$/.test(f) && Number(f.slice(1)) >= oldest && v !== '0')
    .sort();
  return buckets.length > 0 ? Object.fromEntries(buckets) : undefined;
}

/** lib.lua's RECORD_FIXED: the fields of a record's `r`, in its order. */
const RECORD_FIXED = [
  'tenant',
  'org',
  'keyId',
  'useCase',
  'model',
  'mode',
  'api',
  'prompt',
  'priceIn',
  'priceOut',
  'priceCached',
  'priceUn',
  'priceW5',
  'priceW1h',
  'leaseMs',
  'levels',
  'holds',
  'sampleN',
  'expB',
  'endUser',
];

/** What a live hold's close and extend read of its record (the prices are checked elsewhere). */
function record(h: Record<string, string>): Record<string, string | undefined> {
  const fixed: Record<string, string | undefined> = { ...h };
  if (h.r !== undefined) h.r.split('\x01').forEach((v, i) => (fixed[RECORD_FIXED[i]!] = v));
  const pick = [
    ...RECORD_FIXED.filter((f) => !f.startsWith('price')),
    'state',
    'heldT',
    'heldU',
    'chargedT',
    'chargedU',
    'potT',
    'potU',
    'max',
    'cov',
    'createdAt',
    'expiresAt',
    // The tool-use prices its settle bills reported uses at (close.lua; absent: the model's).
    'tf',
    // The upstream a capacity.move put it on, the one it left, its event written (move.lua).
    'up',
    'mf',
    'mr',
  ];
  return Object.fromEntries(pick.map((f) => [f, fixed[f] || '0']));
}

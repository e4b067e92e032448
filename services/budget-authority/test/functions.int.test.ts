import { appendFileSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startOwnRedis, type OwnRedis } from '@holdfast/testkit';
import type { NatsNames } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { orphanPlan } from '../src/script-args.js';
import { buildLibrary, loadScripts, scriptLibrary } from '../src/scripts.js';
import { startTestAuthority } from '../src/testing.js';
import { authorityTest as test, quiescent, readEvents } from './harness.js';
import { type Books, checkBooks, newBooks, orgsConfig, runLoad, teamsOf } from './load.js';

/**
 * The scripts run as one Redis Functions library (scripts.ts): loaded when the authority
 * starts, and loaded again by the first call that finds it gone (a Redis restarted without
 * persistence, FUNCTION FLUSH, a new node). On a private Redis, so flushing its functions
 * cannot disturb other tests.
 */
describe('the scripts as a Redis Functions library', () => {
  let redis: OwnRedis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startOwnRedis();
    admin = redis.admin;
  });
  afterAll(() => redis?.stop());

  /** An authority on the private Redis, the real clock, serving `orgs`. */
  const startOn = (
    fx: { nc: NatsConnection; natsUrl: string; iso: { keyPrefix: string; names: NatsNames } },
    orgs: string[],
  ) =>
    startTestAuthority({
      natsUrl: fx.natsUrl,
      redisUrl: redis.url,
      nc: fx.nc,
      names: fx.iso.names,
      keyPrefix: fx.iso.keyPrefix,
      config: orgsConfig(orgs),
      clock: false,
    });

  /** Every call answered, none failed or retried, and the books agree with Redis and the events. */
  const expectBooks = async (
    h: Awaited<ReturnType<typeof startOn>>,
    fx: { nc: NatsConnection; iso: { keyPrefix: string; names: NatsNames } },
    teams: string[],
    books: Books,
    calls: number,
  ) => {
    expect(books.admitted + books.refused).toBe(calls);
    expect([...books.errors]).toEqual([]);
    const final = await quiescent(h.client, admin, fx.iso.keyPrefix);
    checkBooks(final, await readEvents(fx.nc, fx.iso.names), teams, books);
  };

  test('an authority loads the library when it starts: every script one function of it', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const h = await startOn({ nc, natsUrl, iso }, [`${iso.token}-org`]);
    try {
      const { name, functions } = scriptLibrary();
      const list = (await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', name)) as unknown[][];
      expect(list).toHaveLength(1);
      const fns = JSON.stringify(list[0]);
      for (const fn of Object.values(functions)) expect(fns).toContain(fn);
    } finally {
      await h.stop();
    }
  });

  test('a Redis that loses the library mid-load (FUNCTION FLUSH, three times) gets it back: no call fails, the books agree', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const orgs = [0, 1, 2].map((i) => `${iso.token}-org${i}`);
    const h = await startOn({ nc, natsUrl, iso }, orgs);
    try {
      const teams = teamsOf(orgs);
      const books = newBooks();
      const load = runLoad(h.client, teams, books, { workers: 64, calls: 30 });
      let flushes = 0;
      for (const at of [200, 700, 1_200]) {
        while (books.admitted + books.refused < at) await new Promise((r) => setTimeout(r, 5));
        await admin.call('FUNCTION', 'FLUSH');
        flushes++;
      }
      await load;
      expect(flushes).toBe(3);
      // Every call found a function or got it back.
      await expectBooks(h, { nc, iso }, teams, books, 64 * 30);
    } finally {
      await h.stop();
    }
  }, 60_000);

  /** How many calls this Redis answered NOPLAN (a plan it did not hold) since RESETSTAT. */
  const noPlans = async () => {
    const info = await admin.info('errorstats');
    return Number(/errorstat_NOPLAN:count=(\d+)/.exec(info)?.[1] ?? 0);
  };

  test('a plan goes by reference once this Redis holds it; a library loaded again holds none, and the calls send theirs again', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const orgs = [0, 1].map((i) => `${iso.token}-org${i}`);
    const teams = teamsOf(orgs);
    const h = await startOn({ nc, natsUrl, iso }, orgs);
    try {
      await admin.config('RESETSTAT');
      const books = newBooks();
      // First sight: each call that finds no plan sends it in full (at most one per worker and
      // team: the workers' first calls of a team race each other).
      const misses = 8 * teams.length;
      await runLoad(h.client, teams, books, { workers: 8, calls: 20 });
      const first = await noPlans();
      expect(first).toBeGreaterThanOrEqual(1);
      expect(first).toBeLessThanOrEqual(misses);
      // Held: every admit and settle names its plan, and none is sent again.
      await runLoad(h.client, teams, books, { workers: 8, calls: 20 });
      expect(await noPlans()).toBe(first);
      // Another authority's start loads the library again (FUNCTION LOAD REPLACE): its plans are
      // gone, and the calls send theirs again, none failing.
      await admin.call('FUNCTION', 'LOAD', 'REPLACE', scriptLibrary().code);
      await runLoad(h.client, teams, books, { workers: 8, calls: 20 });
      const again = (await noPlans()) - first;
      expect(again).toBeGreaterThanOrEqual(1);
      expect(again).toBeLessThanOrEqual(misses);
      await expectBooks(h, { nc, iso }, teams, books, 3 * 8 * 20);
    } finally {
      await h.stop();
    }
  }, 60_000);

  test('the plans a Redis keeps are bounded: two generations of 1,024, the older dropped whole', async ({
    iso,
  }) => {
    await loadScripts(admin);
    const keys = new Keys(iso.keyPrefix);
    const org = `${iso.token}-org`;
    const plan = orphanPlan(keys, org, 'team', undefined, keys.reservation(org, 'none'));
    // close.lua's own arguments: a settle of a reservation no one holds ('unknown', no write).
    const own = [
      '',
      'none',
      'e1',
      'settle',
      '1',
      '1',
      '0',
      '0',
      'success',
      '0',
      '',
      'e2\u0001',
      '',
    ];
    const close = (id: string, full: boolean) => {
      const [, ...rest] = plan.args(full);
      return admin.call(
        'FCALL',
        scriptLibrary().functions.close,
        plan.keys.length,
        ...plan.keys,
        ...own,
        id,
        ...rest,
      ) as Promise<string[]>;
    };
    for (let i = 0; i < 2_100; i++) expect((await close(`p${i}`, true))[0]).toBe('unknown');
    // p0..p1023 filled the first generation, which became the older at p1024 and was dropped
    // at p2048; p1024..p2047 are the older now, p2048.. the newer.
    for (const evicted of ['p0', 'p1023'])
      await expect(close(evicted, false)).rejects.toThrow(/^NOPLAN/);
    for (const kept of ['p1024', 'p2047', 'p2048', 'p2099'])
      expect((await close(kept, false))[0]).toBe('unknown');
  }, 60_000);
});

describe('buildLibrary', () => {
  test('names the library and its functions by a hash of the code: a changed script is a new library', () => {
    const a = buildLibrary();
    expect(a.name).toMatch(/^holdfast_[0-9a-f]{12}$/);
    const hash = a.name.slice('holdfast_'.length);
    expect(a.functions.admit).toBe(`hf_admit_${hash}`);
    expect(a.code.startsWith(`#!lua name=${a.name}\n`)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'holdfast-lua-'));
    try {
      cpSync(new URL('../src/lua/', import.meta.url), dir, { recursive: true });
      appendFileSync(join(dir, 'close.lua'), '\n-- changed\n');
      const b = buildLibrary(pathToFileURL(`${dir}/`));
      expect(b.name).not.toBe(a.name);
      expect(b.functions.close).not.toBe(a.functions.close);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import { appendFileSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { findBinary, startRedisServer, type LocalServer } from '@holdfast/testkit';
import type { NatsNames } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { buildLibrary, scriptLibrary } from '../src/scripts.js';
import { startTestAuthority } from '../src/testing.js';
import { authorityTest as test, quiescent, readEvents } from './harness.js';
import { checkBooks, newBooks, orgsConfig, runLoad, teamsOf } from './load.js';

/**
 * The scripts run as one Redis Functions library (scripts.ts): loaded when the authority
 * starts, and loaded again by the first call that finds it gone (a Redis restarted without
 * persistence, FUNCTION FLUSH, a new node). On a private Redis, so flushing its functions
 * cannot disturb other tests.
 */
describe('the scripts as a Redis Functions library', () => {
  let redis: LocalServer;
  let admin: Redis;
  beforeAll(async () => {
    const bin = findBinary('redis-server');
    if (!bin) throw new Error('redis-server is not on PATH: apt-get install -y redis-server');
    redis = await startRedisServer(bin);
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

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
      expect(books.admitted + books.refused).toBe(64 * 30);
      // Every call found a function or got it back: none failed, none was retried.
      expect([...books.errors]).toEqual([]);
      const final = await quiescent(h.client, admin, iso.keyPrefix);
      checkBooks(final, await readEvents(nc, iso.names), teams, books);
    } finally {
      await h.stop();
    }
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

import { describe, expect } from 'vitest';
import { waitFor, type Isolation, type NatsConnection } from '@holdfast/testkit';
import { scriptLibrary } from '../src/scripts.js';
import { startTestAuthority, type TestAuthority } from '../src/testing.js';
import { recordWrites, single } from './socket-writes.js';
import {
  admissionOf,
  BASE_CONFIG,
  miniCall,
  readEvents,
  authorityTest as test,
} from './harness.js';

async function published(h: TestAuthority): Promise<number> {
  return (await h.authority.ctx.metrics.published.get()).values[0]?.value ?? 0;
}

type Fixtures = { nc: NatsConnection; natsUrl: string; redisUrl: string; iso: Isolation };

/**
 * An authority whose relay pauses 1 s after a round: long enough that another command always
 * comes first. No sweep meanwhile: its reads would carry the deletes too (and save nothing:
 * the XDEL would still write alone).
 */
const startPausing = ({ nc, natsUrl, redisUrl, iso }: Fixtures) =>
  startTestAuthority({
    natsUrl,
    redisUrl,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: BASE_CONFIG,
    relayPauseMs: 1_000,
    sweepIntervalMs: 60_000,
  });

/** Until JetStream stored (so acked to the relay) the reservation's created event. */
const stored = ({ nc, iso }: Fixtures, reservationId: string) =>
  waitFor(async () =>
    (await readEvents(nc, iso.names)).some(
      (e) => e.type === 'reservation.created' && e.reservationId === reservationId,
    )
      ? true
      : undefined,
  );

/**
 * With `appendfsync always` every pass of Redis's event loop that wrote anything pays an AOF
 * write and an fsync (~100 µs of Redis's CPU here, most of a lone call's). The relay's XDEL of
 * what JetStream acked was such a pass of its own; it now waits, through the relay's pause, for
 * the authority's next command on the connection (an admit's or a settle's script call, a lease
 * renewal) and goes in its write, so both share one pass.
 */
describe("the relay's deletes ride with the next command", () => {
  test('an acked entry is deleted in the write of another command, never alone, and relayed once', async ({
    nc,
    natsUrl,
    redisUrl,
    redis,
    iso,
  }) => {
    const f = { nc, natsUrl, redisUrl, iso };
    const h = await startPausing(f);
    try {
      const outbox = `${iso.keyPrefix}:{support-bot}:outbox`;
      const admit = scriptLibrary().functions.admit;
      // The first admit sends its plan in full after NOPLAN: two script calls.
      const first = miniCall(10, 10);
      admissionOf(await h.client.admit(first));
      await stored(f, first.reservationId);
      const writes = recordWrites(single(h.authority.ctx.redis).stream);
      const base = await published(h);
      for (let i = 1; i <= 4; i++) {
        const call = miniCall(10, 10);
        admissionOf(await h.client.admit(call));
        await stored(f, call.reservationId);
      }
      // The last one's delete waits for a command that does not come here (alone after the
      // pause); the three before it rode with the next admit.
      await waitFor(async () => (await redis.xlen(outbox)) === 1 || undefined);
      const xdel = /\r\nxdel\r\n/;
      const deletes = writes.slice().filter((w) => xdel.test(w));
      expect(deletes.length).toBeGreaterThan(0);
      expect(deletes.filter((w) => w.split('\r\n*').length < 2)).toEqual([]);
      expect(deletes.some((w) => w.includes(admit))).toBe(true);
      expect(await published(h)).toBe(base + 4);
    } finally {
      await h.stop();
    }
  });

  test('a stop waits for the deletes: nothing relayed stays in the outbox', async ({
    nc,
    natsUrl,
    redisUrl,
    redis,
    iso,
  }) => {
    const f = { nc, natsUrl, redisUrl, iso };
    const outbox = `${iso.keyPrefix}:{support-bot}:outbox`;
    const h = await startPausing(f);
    let stopped = false;
    try {
      const call = miniCall(10, 10);
      admissionOf(await h.client.admit(call));
      await stored(f, call.reservationId);
      await h.stop();
      stopped = true;
      expect(await redis.xlen(outbox)).toBe(0);
    } finally {
      if (!stopped) await h.stop();
    }
  });
});

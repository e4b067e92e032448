import { ERROR_HEADER, MAX_BATCH_ITEMS, type NatsNames } from '@holdfast/events';
import { AuthorityClient, authoritySubject } from '@holdfast/runtime';
import type { NatsConnection } from '@nats-io/transport-node';
import { describe, expect } from 'vitest';
import {
  admissionOf,
  BASE_CONFIG,
  newId,
  quiescent,
  refusalOf,
  authorityTest as test,
  withPayloadLimit,
} from './harness.js';
import { batchStats } from '../src/testing.js';

const admitBody = (over: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant: 'support-bot',
  keyId: 'bot-1',
  useCase: 'UC-101',
  model: 'gpt-4o-mini',
  promptTokens: 488,
  maxTokens: 512,
  ...over,
});

/** The base config with support-bot's monthly budget set to `limit` tokens. */
const supportBotLimit = (limit: number) => ({
  ...BASE_CONFIG,
  tenants: BASE_CONFIG.tenants.map((t) =>
    t.id === 'support-bot' ? { ...t, budgets: [{ window: 'month', limit, unit: 'tokens' }] } : t,
  ),
});

const batching = (nc: NatsConnection, names: NatsNames, timeoutMs = 5_000) =>
  new AuthorityClient({ nc, names, timeoutMs, batch: true });

describe('batched requests: the call path of one turn in one message', () => {
  test('48 admits asked at once on a budget of 40: one batch, exactly the budget admitted, none over', async ({
    start,
    nc,
    iso,
    redis,
  }) => {
    // A 40,000-token month; each admit holds 488 + 512 = 1,000.
    const h = await start(supportBotLimit(40_000));
    const client = batching(nc, iso.names);
    const replies = await Promise.all(Array.from({ length: 48 }, () => client.admit(admitBody())));
    const admitted = replies.filter((r) => r.ok && r.value.admitted);
    const refused = replies.filter((r) => r.ok && !r.value.admitted);
    expect(admitted).toHaveLength(40);
    expect(refused).toHaveLength(8);
    for (const r of refused) expect(refusalOf(r).code).toBe('budget_exceeded');
    expect(await batchStats(h.authority)).toEqual({ batches: 1, items: 48 });

    // Settle half and release half, again in one turn: each close answered as alone.
    const closes = await Promise.all(
      admitted.map((r, i) => {
        const { reservationId } = admissionOf(r);
        return i % 2 === 0
          ? client.settle({
              reservationId,
              tenant: 'support-bot',
              keyId: 'bot-1',
              usage: { promptTokens: 488, completionTokens: 12 },
              outcome: 'completed',
            })
          : client.release({
              reservationId,
              tenant: 'support-bot',
              keyId: 'bot-1',
              reason: 'upstream_error',
            });
      }),
    );
    expect(closes.map((c) => c.ok && c.value.status)).toEqual(
      admitted.map((_, i) => (i % 2 === 0 ? 'settled' : 'released')),
    );
    expect((await batchStats(h.authority)).items).toBe(88);
    const usage = await quiescent(h.client, redis, iso.keyPrefix);
    const month = usage.tenants
      .find((t) => t.tenant === 'support-bot')!
      .windows.find((w) => w.window === 'month')!;
    expect(month.used).toBe(20 * 500);
    expect(month.held).toBe(0);
  });

  test('a bad item is refused alone: invalid_request for it, the others answered, nothing changed by it', async ({
    start,
    nc,
    iso,
  }) => {
    await start(BASE_CONFIG);
    const client = batching(nc, iso.names);
    const [good, negative, unknownTenant, settleUnknown] = await Promise.all([
      client.admit(admitBody()),
      client.admit(admitBody({ promptTokens: -1 })),
      client.admit(admitBody({ tenant: 'nobody' })),
      client.settle({
        reservationId: newId(),
        tenant: 'support-bot',
        usage: { promptTokens: 1, completionTokens: 1 },
        outcome: 'completed',
      }),
    ]);
    expect(admissionOf(good).admitted).toBe(true);
    expect(!negative.ok && negative.error.code).toBe('invalid_request');
    expect(!negative.ok && negative.error.message).toMatch(/promptTokens/);
    expect(unknownTenant.ok && !unknownTenant.value.admitted && unknownTenant.value.code).toBe(
      'unknown_tenant',
    );
    expect(settleUnknown.ok && settleUnknown.value.status).toBe('unknown');
  });

  test('a malformed batch is refused in headers: not JSON, no items, an unknown operation, too many items', async ({
    start,
    nc,
    iso,
  }) => {
    await start(BASE_CONFIG);
    const subject = authoritySubject(iso.names, 'batch');
    const bodies = [
      'not json',
      JSON.stringify({ items: [] }),
      JSON.stringify({ items: [{ op: 'config.apply', body: {} }] }),
      JSON.stringify({ items: [{ op: 'admit', body: admitBody() }], extra: 1 }),
      JSON.stringify({
        items: Array.from({ length: MAX_BATCH_ITEMS + 1 }, () => ({
          op: 'admit',
          body: admitBody(),
        })),
      }),
    ];
    for (const body of bodies) {
      const m = await nc.request(subject, body, { timeout: 5_000 });
      expect(m.headers?.get(ERROR_HEADER), body.slice(0, 40)).toBe('invalid_request');
    }
    // The too-large batch admitted nothing.
    const usage = await batching(nc, iso.names).usage({});
    expect(usage.ok && usage.value.tenants.every((t) => t.inFlight === 0)).toBe(true);
  });

  test('more than a batch holds at once goes in several, every item answered', async ({
    start,
    nc,
    iso,
  }) => {
    const h = await start(supportBotLimit(1_000_000));
    const client = batching(nc, iso.names);
    const replies = await Promise.all(
      Array.from({ length: MAX_BATCH_ITEMS * 2 + 3 }, () => client.admit(admitBody())),
    );
    expect(replies.every((r) => r.ok && r.value.admitted)).toBe(true);
    expect(await batchStats(h.authority)).toEqual({ batches: 3, items: MAX_BATCH_ITEMS * 2 + 3 });
  });

  test('a batch nobody answers: the item that may wait less times out first, then the rest', async ({
    nc,
    iso,
  }) => {
    // A responder on the batch subject that never answers (an authority stuck on Redis).
    const stuck = nc.subscribe(authoritySubject(iso.names, 'batch'), { callback: () => undefined });
    const client = batching(nc, iso.names, 400);
    const t0 = performance.now();
    const when: number[] = [];
    const [short, long] = await Promise.all([
      client.admit(admitBody(), 100).then((r) => (when.push(performance.now() - t0), r)),
      client.admit(admitBody(), 400).then((r) => (when.push(performance.now() - t0), r)),
    ]);
    stuck.unsubscribe();
    expect(!short.ok && short.error.code).toBe('timeout');
    expect(!long.ok && long.error.code).toBe('timeout');
    expect(when[0]).toBeLessThan(300);
    expect(when[1]).toBeGreaterThanOrEqual(390);
  });

  test('an authority without batch (an older replica): the items go alone and are answered', async ({
    start,
    nc,
    iso,
  }) => {
    await start(BASE_CONFIG);
    // The older replica: it answers admit on its prefix (by asking the real one) and has no batch.
    const old = { ...iso.names, authorityPrefix: `${iso.names.authorityPrefix}-old` };
    let asked = 0;
    const single = nc.subscribe(authoritySubject(old, 'admit'), {
      callback: (_err, m) => {
        asked++;
        void nc
          .request(authoritySubject(iso.names, 'admit'), m.data, { timeout: 5_000 })
          .then((r) => m.respond(r.data));
      },
    });
    const client = batching(nc, old);
    const replies = await Promise.all([client.admit(admitBody()), client.admit(admitBody())]);
    expect(replies.map((r) => r.ok && r.value.admitted)).toEqual([true, true]);
    expect(asked).toBe(2);
    single.unsubscribe();
  });

  test('no authority at all (down): the items find no responder, and once one is back requests are batched again', async ({
    start,
    nc,
    iso,
  }) => {
    const client = batching(nc, iso.names);
    const away = await Promise.all([client.admit(admitBody()), client.admit(admitBody())]);
    expect(away.map((r) => !r.ok && r.error.code)).toEqual(['no_responders', 'no_responders']);
    // Not taken for an older authority: what one turn asks once it is back goes in one batch.
    const h = await start(BASE_CONFIG);
    const back = await Promise.all([client.admit(admitBody()), client.admit(admitBody())]);
    expect(back.map((r) => r.ok && r.value.admitted)).toEqual([true, true]);
    expect(await batchStats(h.authority)).toEqual({ batches: 1, items: 2 });
  });

  test('a batch over the NATS payload limit goes in parts, its answers too', async ({
    redisUrl,
    redis: _cleanup,
    iso,
  }) => {
    await withPayloadLimit(
      8_192,
      { redisUrl, iso, config: supportBotLimit(1_000_000) },
      async (h, nc) => {
        // Every reply to a batch, as it reaches this connection.
        let answers = 0;
        const inbox = nc.subscribe('_INBOX.>', {
          callback: (_err, m) => {
            if (m.string().startsWith('{"items":')) answers++;
          },
        });
        const client = batching(nc, iso.names);
        // 64 admits are ~12 KB asked and ~20 KB answered.
        const replies = await Promise.all(
          Array.from({ length: 64 }, () => client.admit(admitBody())),
        );
        expect(replies.filter((r) => r.ok && r.value.admitted)).toHaveLength(64);
        const { batches, items } = await batchStats(h.authority);
        expect(items).toBe(64);
        expect(batches).toBeGreaterThan(1);
        expect(answers).toBeGreaterThan(batches);
        inbox.unsubscribe();
      },
    );
  });
});

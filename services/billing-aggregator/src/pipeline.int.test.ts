import { randomUUID } from 'node:crypto';
import { DEAD_LETTER_HEADERS, deadLetterSubject, type HoldfastEvent } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { aggregatorTest as test } from '../test/fixture.js';
import { jetstreamManager } from '@nats-io/jetstream';
import type { Msg } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { publishEvents, publishRaw, refusal, settledCall } from '../test/events.js';
import {
  aggregatorConfig,
  callsBilling,
  countEvents,
  eventsCounter,
  silent,
  viewTokens,
} from '../test/harness.js';
import { startAggregator } from './index.js';

import { qualified, sql } from './sql.js';

test('every event lands once: a forced redelivery of the whole stream and republished copies are not double counted', async ({
  nc,
  infra,
  ch,
  iso,
}) => {
  const agg = await startAggregator({ config: aggregatorConfig(infra), logger: silent });
  try {
    const events: HoldfastEvent[] = [];
    for (let i = 0; i < 30; i++) {
      const tenant = i % 3 === 0 ? 'support-bot' : 'batch-summariser';
      events.push(...settledCall({ tenant, prompt: 100 + i, completion: 10 }));
    }
    for (let i = 0; i < 6; i++) events.push(refusal({ shadow: i % 2 === 0 }));
    await publishEvents(nc, iso.names, events);
    await waitFor(async () => (await countEvents(ch, iso.database)) === events.length, {
      what: 'first delivery',
    });

    // Redeliver everything: a recreated durable consumer starts from the first message.
    const jsm = await jetstreamManager(nc);
    await jsm.consumers.delete(iso.names.eventsStream, 'billing-aggregator');
    // And republish ten events past the stream's duplicate detection (a relay after its window).
    await publishEvents(nc, iso.names, events.slice(0, 10), { msgId: () => randomUUID() });
    await waitFor(
      async () =>
        // A copy that meets its twin in one batch is dropped there, else it is inserted again.
        (await eventsCounter(agg.registry, 'inserted')) +
          (await eventsCounter(agg.registry, 'duplicate_in_batch')) >=
          2 * events.length + 10 &&
        (await jsm.consumers.info(iso.names.eventsStream, 'billing-aggregator')).num_ack_pending ===
          0,
      { timeoutMs: 30_000, what: 'redelivered and republished events inserted again' },
    );

    expect(await countEvents(ch, iso.database, false)).toBeGreaterThanOrEqual(events.length);
    expect(await countEvents(ch, iso.database)).toBe(events.length);
    const t = (name: string) => qualified(iso.database, name);
    const expected = new Map<string, number>();
    for (const e of events) {
      if (e.type === 'reservation.settled') {
        expected.set(e.tenant, (expected.get(e.tenant) ?? 0) + e.billedTokens);
      }
    }
    const hourly = await ch.query<{ tenant: string; tokens: string; calls: string }>(
      sql`SELECT tenant, sum(tokens) AS tokens, sum(calls) AS calls FROM ${t('usage_hourly_v1')} GROUP BY tenant ORDER BY tenant`,
    );
    expect(hourly.map((r) => [r.tenant, Number(r.tokens), Number(r.calls)])).toEqual([
      ['batch-summariser', expected.get('batch-summariser'), 20],
      ['support-bot', expected.get('support-bot'), 10],
    ]);
    const daily = await ch.query<{ tokens: string }>(
      sql`SELECT sum(tokens_day) AS tokens FROM ${t('usage_daily_v1')}`,
    );
    expect(Number(daily[0]?.tokens)).toBe([...expected.values()].reduce((a, b) => a + b));
    const decisions = await ch.query<{ decision: string; n: string }>(
      sql`SELECT decision, count() AS n FROM ${t('decisions_v2')} GROUP BY decision ORDER BY decision`,
    );
    expect(decisions.map((r) => [r.decision, Number(r.n)])).toEqual([
      ['admit', 30],
      ['refuse', 6],
    ]);
    const refusals = await ch.query<{ n: string }>(
      sql`SELECT sum(refusals) AS n FROM ${t('refusals_by_reason_v1')}`,
    );
    expect(Number(refusals[0]?.n)).toBe(6);
    const spenders = await ch.query<{ tenant: string; calls: string }>(
      sql`SELECT tenant, sum(calls) AS calls FROM ${t('top_spenders_v1')} GROUP BY tenant ORDER BY tenant`,
    );
    expect(spenders.map((r) => Number(r.calls))).toEqual([20, 10]);
    const states = await ch.query<{ n: string }>(
      sql`SELECT count() AS n FROM ${t('window_states_v2')}`,
    );
    expect(Number(states[0]?.n)).toBe(events.length);

    // Ops endpoints.
    const base = `http://127.0.0.1:${agg.opsPort}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      ok: true,
      checks: { nats: true, clickhouse: true, consumer: true },
    });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    for (const name of [
      'holdfast_aggregator_batch_size_bucket',
      'holdfast_aggregator_flush_seconds_bucket',
      'holdfast_aggregator_consumer_pending',
      'holdfast_aggregator_event_lag_seconds',
    ]) {
      expect(metrics).toContain(name);
    }
  } finally {
    await agg.stop();
  }
});

test('a malformed event is dead-lettered with its reason and the pipeline goes on', async ({
  nc,
  infra,
  ch,
  iso,
}) => {
  const dead: Msg[] = [];
  const sub = nc.subscribe(deadLetterSubject(iso.names, 'billing-aggregator'), {
    callback: (_err, m) => void dead.push(m),
  });
  await nc.flush();
  const agg = await startAggregator({ config: aggregatorConfig(infra), logger: silent });
  try {
    const [created, settled] = settledCall();
    await publishRaw(nc, iso.names, 'batch-summariser.reservation.settled', '{not json');
    await publishRaw(
      nc,
      iso.names,
      'batch-summariser.reservation.settled',
      JSON.stringify({ ...settled, id: randomUUID(), billedTokens: -5 }),
    );
    await publishRaw(
      nc,
      iso.names,
      'batch-summariser.reservation.settled',
      JSON.stringify({ ...settled, id: randomUUID(), schemaVersion: 99 }),
    );
    // A valid event whose prompt does not fit its UInt32 column: refused before its batch.
    await publishRaw(
      nc,
      iso.names,
      'batch-summariser.reservation.created',
      JSON.stringify({ ...created, id: randomUUID(), promptTokens: 2 ** 32 }),
    );
    await publishEvents(nc, iso.names, [created, settled]);
    await waitFor(async () => dead.length === 4 && (await countEvents(ch, iso.database)) === 2, {
      what: 'four dead letters and the two valid events',
    });
    const reasons = dead.map((m) => m.headers?.get(DEAD_LETTER_HEADERS.reason));
    expect(reasons[0]).toBe('event is not valid JSON');
    expect(reasons[1]).toMatch(/billedTokens/);
    expect(reasons[2]).toBe('unsupported schemaVersion 99');
    expect(reasons[3]).toBe('row does not fit events_raw_v1: prompt_tokens');
    expect(dead[0]?.string()).toBe('{not json');
    expect(dead.map((m) => m.headers?.get(DEAD_LETTER_HEADERS.streamSeq))).toEqual([
      '1',
      '2',
      '3',
      '4',
    ]);
    // Terminated, not redelivered.
    const jsm = await jetstreamManager(nc);
    await waitFor(
      async () =>
        (await jsm.consumers.info(iso.names.eventsStream, 'billing-aggregator')).num_ack_pending ===
        0,
      { what: 'nothing left unacked' },
    );
    expect(await eventsCounter(agg.registry, 'dead_lettered')).toBe(4);
  } finally {
    sub.unsubscribe();
    await agg.stop();
  }
});

test('a batch is flushed as soon as it is full, and stop() flushes the rest', async ({
  nc,
  infra,
  ch,
  iso,
}) => {
  const config = aggregatorConfig(infra, {
    BILLING_AGGREGATOR_BATCH_SIZE: '10',
    BILLING_AGGREGATOR_FETCH_SIZE: '10',
    // Far longer than the test: only the size trigger and the drain can flush here.
    BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '600000',
  });
  const agg = await startAggregator({ config, logger: silent });
  try {
    const events = Array.from({ length: 13 }, () => settledCall())
      .flat()
      .slice(0, 25);
    await publishEvents(nc, iso.names, events);
    await waitFor(async () => (await countEvents(ch, iso.database)) === 20, {
      what: 'two full batches',
    });
    await waitFor(async () => (await eventsCounter(agg.registry, 'inserted')) === 20, {
      what: 'the second batch acked',
    });
    await agg.stop();
    expect(await countEvents(ch, iso.database)).toBe(events.length);
  } finally {
    await agg.stop().catch(() => undefined);
  }
});

test('two replicas share the durable consumer: each takes a share, every event lands once', async ({
  nc,
  infra,
  ch,
  iso,
}) => {
  const config = aggregatorConfig(infra, {
    BILLING_AGGREGATOR_BATCH_SIZE: '100',
    BILLING_AGGREGATOR_FETCH_SIZE: '50',
  });
  const a = await startAggregator({ config, logger: silent });
  const b = await startAggregator({ config, logger: silent });
  try {
    const { events, billed } = callsBilling(1_000);
    await publishEvents(nc, iso.names, events);
    await waitFor(async () => (await countEvents(ch, iso.database)) === events.length, {
      timeoutMs: 20_000,
      what: 'every event from two replicas',
    });
    const shares = [
      await eventsCounter(a.registry, 'inserted'),
      await eventsCounter(b.registry, 'inserted'),
    ];
    expect(shares[0]).toBeGreaterThan(0);
    expect(shares[1]).toBeGreaterThan(0);
    expect(await viewTokens(ch, iso.database)).toBe(billed);
  } finally {
    await a.stop();
    await b.stop();
  }
});

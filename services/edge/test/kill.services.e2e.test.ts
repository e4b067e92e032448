import { setTimeout as sleep } from 'node:timers/promises';
import { eventSubject, parseEvent } from '@holdfast/events';
import { infraTest as test } from '@holdfast/testkit';
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import OpenAI from 'openai';
import { expect } from 'vitest';
import { testClickHouse } from './books.js';
import { BEHAVIOUR, consumersCaughtUp, readBooks, streamedLoad } from './kill-load.js';
import {
  CAP,
  KEY,
  processStackTest,
  quiet,
  startProcessStack,
  TENANT,
  type ProcessStack,
  type ServiceName,
} from './processes.js';

/**
 * Every process on its own, 16 workers of streamed calls, kill -9 of one service, restarted
 * 2 s later. Nothing is lost and nothing counted twice: what the mock upstream billed = the
 * authority's ledger = ClickHouse, to the token and the micro-dollar, and the aggregator and
 * the alerter consumed every event.
 */
const VICTIMS: ServiceName[] = ['authority', 'aggregator', 'alerter'];
for (const victim of VICTIMS) {
  test(`kill -9 of the ${victim} under load, restarted 2 s later: the mock's bill = ledger = ClickHouse`, async ({
    natsUrl,
    redisUrl,
    clickhouseUrl,
    clickhouse,
    iso,
  }) => {
    void clickhouse; // the test's database is dropped afterwards
    const s = await startProcessStack({
      natsUrl,
      redisUrl,
      clickhouseUrl,
      iso,
      behaviour: BEHAVIOUR,
      // Shorter than the authority's absence: holds expire meanwhile (billed at their worst
      // case), and the settles and releases that come late must correct that exactly.
      leaseMs: victim === 'authority' ? 2_000 : 6_000,
    });
    const ch = testClickHouse(clickhouseUrl);
    try {
      const load = streamedLoad(s.edgeUrl, 16);
      await load.served(80);
      const inFlight = load.stats.inFlight;
      await s.kill(victim);
      await sleep(2_000);
      await s.restart(victim);
      await load.served(80);
      const stats = await load.stop();
      const books = await readBooks(s, ch, iso.database);
      await consumersCaughtUp(s, iso.names);
      console.log(
        `[kill -9 ${victim}] ${inFlight} in flight at the kill; served ${stats.served}, failed closed ${stats.failedClosed}; books ${JSON.stringify(books)}`,
      );
      expect(stats.other).toEqual([]);
      expect(stats.cut).toBe(0);
      // Only the authority's absence refuses calls (503, fail closed); the others are off the path.
      if (victim !== 'authority') expect(stats.failedClosed).toBe(0);
      expect(books.ledger).toEqual(books.provider);
      expect(books.clickhouse).toEqual(books.ledger);
    } finally {
      await ch.close();
      await s.stop();
    }
  });
}

processStackTest(
  'kill -9 of the authority during a call, back after its lease: the late settle lands as soon as it is ready',
  async ({ processStack }) => {
    // One call of about 2 s on a lease of 2 s; the authority away for 5 s, then restarted.
    const s = await processStack({
      leaseMs: 2_000,
      behaviour: { tokenDelayMs: 20, completion: { mode: 'fixed' as const, tokens: 100 } },
    });
    const openai = new OpenAI({ baseURL: `${s.edgeUrl}/v1`, apiKey: KEY, maxRetries: 0 });
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'a report on the budget' }],
      max_tokens: CAP,
      stream: true,
    });
    let killedAt = 0;
    for await (const _ of stream) {
      if (killedAt) continue;
      await s.kill('authority');
      killedAt = performance.now();
    }
    await sleep(5_000 - (performance.now() - killedAt));
    await s.restart('authority');
    const [call] = s.upstream.stats().recent;
    const exact = call!.promptTokens + call!.completionTokens;
    const u = await quiet(s);
    expect(u.windows.map((w) => w.used)).toEqual([exact]);
    // Both instants on the authority's host: its `ready` line, and the settle's event (Redis TIME).
    const ready = JSON.parse(s.lines('authority').find((l) => l.includes('"msg":"ready"'))!) as {
      time: string;
    };
    const settled = await settledAt(s);
    const lateMs = settled - Date.parse(ready.time);
    console.log(
      `[kill -9 authority] the late settle landed ${lateMs} ms after the authority's ready`,
    );
    expect(lateMs).toBeLessThan(1_000);
  },
);

/** When the authority applied the tenant's one settle: its `reservation.settled` event's time. */
async function settledAt(s: ProcessStack): Promise<number> {
  const consumer = await jetstream(s.nc).consumers.get(s.names.eventsStream, {
    deliver_policy: DeliverPolicy.All,
    filter_subjects: eventSubject(s.names, TENANT, 'reservation.settled'),
  });
  const m = await consumer.next({ expires: 10_000 });
  if (!m) throw new Error('no reservation.settled event');
  const event = parseEvent(m.data);
  if (!event.ok) throw new Error(event.error.message);
  return Date.parse(event.value.time);
}

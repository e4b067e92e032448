import { setTimeout as sleep } from 'node:timers/promises';
import { qualified, sql } from '@holdfast/billing-aggregator';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { testClickHouse } from './books.js';
import { BEHAVIOUR, consumersCaughtUp, readBooks, streamedLoad } from './kill-load.js';
import { CAP, KEY, startProcessStack, TENANT } from './processes.js';

/**
 * kill -9 of the edge mid-stream, under 16 workers of streamed calls. Nobody can tell what the
 * model billed for the calls it had in flight, so their holds expire and reserve bills each at
 * its worst case (onExpiry: bill). Once those leases have passed the books never show less
 * than the model billed, and more by no more than the worst cases of the calls that were cut.
 */
test('kill -9 of the edge mid-stream: ledger and ClickHouse at or above the mock bill, by at most the worst cases in flight', async ({
  natsUrl,
  redisUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse;
  const s = await startProcessStack({
    natsUrl,
    redisUrl,
    clickhouseUrl,
    iso,
    behaviour: BEHAVIOUR,
    leaseMs: 3_000,
  });
  const ch = testClickHouse(clickhouseUrl);
  try {
    const load = streamedLoad(s.edgeUrl, 16);
    await load.served(80);
    const inFlight = load.stats.inFlight;
    await s.kill('edge');
    const cut = await load.stop();
    expect(cut.cut).toBeGreaterThan(0);
    await sleep(2_000);
    await s.restart('edge');
    // The restarted edge serves again, and settles what it serves exactly.
    const again = streamedLoad(s.edgeUrl, 16);
    await again.served(40);
    const after = await again.stop();
    expect(after.other).toEqual([]);
    expect(after.cut + after.failedClosed).toBe(0);

    const books = await readBooks(s, ch, iso.database);
    await consumersCaughtUp(s, iso.names);
    const worstCases = inFlight * (books.maxPrompt + CAP);
    const over = books.ledger.tokens - books.provider.tokens;
    console.log(
      `[kill -9 edge] ${inFlight} calls in flight (worst cases ${worstCases} tokens), ${cut.cut} cut; the books over the mock bill by ${over} tokens; ${JSON.stringify(books)}`,
    );
    expect(cut.other).toEqual([]);
    expect(over).toBeGreaterThanOrEqual(0);
    expect(over).toBeLessThanOrEqual(worstCases);
    expect(books.ledger.microUsd).toBeGreaterThanOrEqual(books.provider.microUsd);
    expect(books.clickhouse).toEqual(books.ledger);
  } finally {
    await ch.close();
    await s.stop();
  }
});

/**
 * kill -9 of the edge while it answers a refusal flood itself (its refusal memory): a client
 * is answered only once its refusal is recorded, so every 429 a client read is in the books;
 * the only refusals the books may have beyond them are those of the calls cut by the kill.
 */
test('kill -9 of the edge mid refusal flood: every refusal a client got is in ClickHouse', async ({
  natsUrl,
  redisUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse;
  const s = await startProcessStack({ natsUrl, redisUrl, clickhouseUrl, iso, limit: 10 });
  const ch = testClickHouse(clickhouseUrl);
  try {
    const body = JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'a call larger than the whole budget' }],
      max_tokens: 50,
    });
    let refused = 0;
    let other = 0;
    let running = true;
    const url = `${s.edgeUrl}/v1/chat/completions`;
    const worker = async () => {
      while (running) {
        try {
          const r = await fetch(url, {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body,
          });
          const text = await r.text();
          if (r.status === 429 && text.includes('budget_exceeded')) refused++;
          else other++;
        } catch {
          // Cut by the kill: not answered, so not counted.
        }
      }
    };
    const workers = Array.from({ length: 16 }, worker);
    await waitFor(() => refused >= 300 || undefined, { what: '300 refusals' });
    await s.kill('edge');
    running = false;
    await Promise.all(workers);
    expect(other).toBe(0);
    const view = qualified(iso.database, 'refusals_by_reason_v1');
    const books = async () => {
      const [r] = await ch.query<{ n: string }>(
        sql`SELECT sum(refusals) AS n FROM ${view} WHERE tenant = ${TENANT} AND reason = 'budget_exceeded'`,
      );
      return Number(r?.n ?? 0);
    };
    const counted = await waitFor(async () => ((await books()) >= refused ? books() : undefined), {
      what: `ClickHouse to count the ${refused} refusals clients got`,
      timeoutMs: 30_000,
    });
    console.log(
      `[kill -9 edge, refusal flood] clients got ${refused} refusals; the books count ${counted}`,
    );
    // At most one more per worker: a call refused and recorded whose answer the kill cut.
    expect(counted).toBeLessThanOrEqual(refused + 16);
  } finally {
    await ch.close();
    await s.stop();
  }
});

import { modelPrices } from '@holdfast/config';
import type { NatsNames } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import OpenAI, { APIConnectionError, APIError } from 'openai';
import { qualified, sql, type SqlExecutor } from '@holdfast/billing-aggregator';
import { providerBooks } from './books.js';
import { CAP, KEY, PRICE, quiet, TENANT, type ProcessStack } from './processes.js';

/** Streams of 50 to 150 tokens, 3 ms apart: about 16 calls in flight all the time. */
export const BEHAVIOUR = {
  firstTokenLatencyMs: 20,
  tokenDelayMs: 3,
  completion: { mode: 'uniform' as const, min: 50, max: 150 },
};

interface LoadStats {
  started: number;
  /** Streams read to their end. */
  served: number;
  /** 503s: the edge failing closed while a part was away. */
  failedClosed: number;
  /** Calls cut midway (the edge itself died) or not reaching it (it was down). */
  cut: number;
  /** Any other failure, by message: a test of a kill that should not cause them expects none. */
  other: string[];
  /** Calls under way now. */
  inFlight: number;
}

/**
 * `workers` loops of streamed chat calls through the edge until `stop()`; each call asks for
 * up to CAP tokens with a prompt of 10 to 49 words. Failures are counted, never retried.
 */
export function streamedLoad(url: string, workers = 16) {
  const stats: LoadStats = {
    started: 0,
    served: 0,
    failedClosed: 0,
    cut: 0,
    other: [],
    inFlight: 0,
  };
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 30_000 });
  let stopping = false;
  const one = async (i: number) => {
    const words = Array.from({ length: 10 + (i % 40) }, (_, k) => (k % 2 ? 'budget' : 'report'));
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: words.join(' ') }],
      max_tokens: CAP,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _ of stream) void _;
  };
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = w; !stopping; i += workers) {
      stats.started++;
      stats.inFlight++;
      try {
        await one(i);
        stats.served++;
      } catch (err) {
        if (err instanceof APIError && err.status === 503) stats.failedClosed++;
        else if (err instanceof APIConnectionError || !(err instanceof APIError)) stats.cut++;
        else stats.other.push(`${err.status}: ${err.message}`);
        // A part is away: do not spin on immediate refusals.
        await new Promise((r) => setTimeout(r, 50));
      } finally {
        stats.inFlight--;
      }
    }
  });
  return {
    stats,
    /** Resolves once `n` more calls were served than now. */
    served: (n: number, timeoutMs = 30_000) => {
      const target = stats.served + n;
      return waitFor(() => stats.served >= target, { timeoutMs, what: `${target} calls served` });
    },
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
      return stats;
    },
  };
}

interface BooksCheck {
  /** What the mock upstream billed: prompt + output tokens, and micro-USD. */
  provider: { tokens: number; microUsd: number };
  /** The authority's counters. */
  ledger: { tokens: number; microUsd: number };
  /** What ClickHouse's daily view charged the tenant. */
  clickhouse: { tokens: number; microUsd: number };
  /** The largest prompt the provider saw (for a worst case). */
  maxPrompt: number;
}

/**
 * The three books once the stack is quiet. ClickHouse is waited for until it matches the
 * ledger (the aggregator flushes every 200 ms), then read as it is, so a mismatch shows.
 */
export async function readBooks(s: ProcessStack, ch: SqlExecutor, database: string) {
  const ledger = await quiet(s);
  const records = s.upstream.stats().recent;
  const provider = providerBooks(records, modelPrices(PRICE, 'openai'));
  const view = qualified(database, 'usage_daily_v1');
  const read = async () => {
    const [r] = await ch.query<{ tokens: string; usd: string }>(
      sql`SELECT sum(tokens_day) AS tokens, sum(cost_micro_usd_day) AS usd FROM ${view} WHERE tenant = ${TENANT}`,
    );
    return { tokens: Number(r?.tokens ?? 0), microUsd: Number(r?.usd ?? 0) };
  };
  const ledgerBooks = { tokens: ledger.billedTokens, microUsd: ledger.billedMicroUsd };
  let clickhouse = await read();
  await waitFor(
    async () => {
      clickhouse = await read();
      return clickhouse.tokens === ledgerBooks.tokens;
    },
    // After a NATS server's loss the aggregator's consumer restarts once its heartbeats are
    // missed, with backoff: on a loaded 2-core box that has taken over 30 s.
    { timeoutMs: 90_000, what: 'ClickHouse to catch up with the ledger' },
  ).catch(() => undefined);
  return {
    provider: { tokens: provider.prompt + provider.completion, microUsd: provider.microUsd },
    ledger: ledgerBooks,
    clickhouse,
    maxPrompt: Math.max(0, ...records.map((r) => r.promptTokens)),
  } satisfies BooksCheck;
}

/** The aggregator's and the alerter's durables have every event: none pending, none unacked. */
export async function consumersCaughtUp(s: ProcessStack, names: NatsNames): Promise<void> {
  const jsm = await jetstreamManager(s.nc);
  for (const durable of ['billing-aggregator', 'alerter']) {
    await waitFor(
      async () => {
        const c = await jsm.consumers.info(names.eventsStream, durable);
        return c.num_pending === 0 && c.num_ack_pending === 0;
      },
      { timeoutMs: 90_000, what: `${durable} to have consumed every event` },
    );
  }
}

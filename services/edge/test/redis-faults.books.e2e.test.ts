import { slotOf } from '@holdfast/budget-authority';
import { modelPrices } from '@holdfast/config';
import { startKillableRedis, startRedisCluster, waitFor, serverBinary } from '@holdfast/testkit';
import OpenAI from 'openai';
import { expect } from 'vitest';
import { clickhouseBooks, providerBooks, withAggregator, type testClickHouse } from './books.js';
import { edgeTest as test, entry, KEYS, type Stack, type StackOptions } from './harness.js';
import { digestMessages } from './workload.js';

/**
 * Issue 13's books under Redis faults, end to end (edge, mock upstream, authority, aggregator,
 * ClickHouse): 16 workers of calls while Redis dies, and afterwards what the mock billed =
 * ClickHouse = the ledger, to the token and the micro-dollar, and the budget never over.
 *   - one Redis (appendfsync always) killed with -9 and restarted from its AOF;
 *   - a Redis Cluster master killed with -9 (its replica paused first, so the kill would lose
 *     acknowledged writes without WAIT) with the authority waiting for 1 replica per write.
 * A call that fails while Redis is down is answered 503 and never reaches the model.
 */

const BUDGET = 40_000;
const CALLS = 80;
const GPT = { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 };
const behaviour = {
  firstTokenLatencyMs: 150,
  completion: { mode: 'uniform' as const, min: 150, max: 400 },
};
// A lease longer than the outage: a call in flight when Redis dies is settled when it is back
// (a real lease is 30 minutes). Holds of calls never forwarded are given back at expiry.
const patch: StackOptions['patch'] = (c) => {
  Object.assign(entry(c.tenants, 'batch-summariser'), { leaseMs: 20_000, onExpiry: 'release' });
};

/** CALLS digest calls pulled by 16 workers; `fault` runs once 15 have been served. */
async function underFault(s: Stack, fault: () => Promise<void>) {
  const out = { served: 0, refused: 0, failed: 0 };
  let faulted: Promise<void> | undefined;
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let i = next++; i < CALLS; i = next++) {
        // A call that failed closed is tried again, as a client would, until it is answered.
        for (;;) {
          try {
            await s.openai(KEYS.batch).chat.completions.create({
              model: 'gpt-4o-mini',
              messages: digestMessages(i),
              max_tokens: 512,
            });
            if (++out.served === 15) faulted = fault();
            break;
          } catch (err) {
            if (!(err instanceof OpenAI.APIError)) throw err;
            if (err.status === 429) {
              out.refused++;
              break;
            }
            if (err.status !== 503) throw err;
            out.failed++;
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      }
    }),
  );
  await faulted;
  return out;
}

async function books(
  s: Stack,
  run: Awaited<ReturnType<typeof underFault>>,
  ch: ReturnType<typeof testClickHouse>,
  database: string,
) {
  const ledger = await waitFor(
    async () => {
      const u = await s.usage('batch-summariser');
      return u.inFlight === 0 && u.windows.every((w) => w.held === 0) ? u : undefined;
    },
    { timeoutMs: 40_000, what: 'every hold settled or given back' },
  );
  const provider = providerBooks(s.upstream.stats().recent, modelPrices(GPT, 'openai'));
  const billed = provider.prompt + provider.completion;
  console.log(
    `served ${run.served}, refused ${run.refused}, failed closed ${run.failed}; the model billed ${billed} tokens of ${BUDGET}, ${provider.calls} calls`,
  );
  expect(run.failed).toBeGreaterThan(0);
  // Every call was answered in the end, and the budget was used up, not refused away.
  expect(run.served + run.refused).toBe(CALLS);
  expect(run.refused).toBeGreaterThan(0);
  expect(billed).toBeGreaterThan(0.85 * BUDGET);
  expect(billed).toBeLessThanOrEqual(BUDGET);
  expect(provider.calls).toBe(run.served);
  expect({ tokens: ledger.billedTokens, microUsd: ledger.billedMicroUsd }).toEqual({
    tokens: billed,
    microUsd: provider.microUsd,
  });
  const chBooks = await clickhouseBooks(ch, database, 'batch-summariser', 'chat', provider.calls);
  const { charged, chargedMicroUsd, apis: _apis, ...rows } = chBooks;
  expect(rows).toEqual(provider);
  expect({ charged, chargedMicroUsd }).toEqual({
    charged: billed,
    chargedMicroUsd: provider.microUsd,
  });
}

test('kill -9 of one Redis (appendfsync always) mid-run and a restart from its AOF: mock = ClickHouse = ledger', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  const redis = await startKillableRedis(serverBinary('redis'), { appendfsync: 'always' });
  try {
    const s = await stack({ behaviour, patch, redisUrl: redis.url });
    await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
      const run = await underFault(s, async () => {
        redis.kill();
        await new Promise((r) => setTimeout(r, 1_000));
        await redis.restart();
      });
      await books(s, run, ch, iso.database);
    });
  } finally {
    await redis.stop();
  }
}, 90_000);

test('kill -9 of a Redis Cluster master mid-run, WAIT 1: mock = ClickHouse = ledger', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  const cluster = await startRedisCluster(serverBinary('redis'), { nodeTimeoutMs: 1_000 });
  try {
    const s = await stack({ behaviour, patch, redisUrl: cluster.url, waitReplicas: 1 });
    await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
      const run = await underFault(s, async () => {
        // batch-summariser is its own org: its keys are in the slot of its name.
        const victim = await cluster.masterOf(slotOf('batch-summariser'));
        const replica = await cluster.aReplicaOf(victim);
        cluster.pause(replica);
        await new Promise((r) => setTimeout(r, 600));
        cluster.kill(victim);
        cluster.resume(replica);
        await waitFor(async () => !(await cluster.masters()).includes(victim), {
          timeoutMs: 20_000,
          what: 'the replica promoted',
        });
        await cluster.restart(victim);
        await cluster.waitOk();
      });
      await books(s, run, ch, iso.database);
    });
  } finally {
    await cluster.stop();
  }
}, 90_000);

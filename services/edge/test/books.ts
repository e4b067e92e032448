import {
  createClickHouse,
  loadConfig,
  qualified,
  runAudit,
  sql,
  startAggregator,
  type Aggregator,
  type SqlExecutor,
} from '@holdfast/billing-aggregator';
import {
  modelPrices,
  natsNamesToEnv,
  toolFeeMicroUsd,
  toolUsePrices,
  type ModelPrices,
  type PriceConfig,
} from '@holdfast/config';
import type { ApiSurface, NatsNames, ToolUseKind } from '@holdfast/events';
import type { RequestRecord } from '@holdfast/mock-upstream';
import { createLogger } from '@holdfast/runtime';
import { waitFor, type ClickHouseClient } from '@holdfast/testkit';
import { expect } from 'vitest';
import type { Stack } from './harness.js';
import type { WorkloadResult } from './workload.js';

/** The books of one tenant: prompt, output, each category, cost (integer micro-USD), calls. */
export interface Books {
  calls: number;
  prompt: number;
  cached: number;
  write5m: number;
  write1h: number;
  completion: number;
  reasoning: number;
  audioPrompt: number;
  audioCompletion: number;
  microUsd: number;
}

/** Prices as the config compiles them (pico-USD per token). */
type Prices = ModelPrices;

/**
 * The books as the provider (the mock's own call log) has them: every call it billed, each
 * category priced as configured (at the prices of its service tier, when given per call) with the authority's arithmetic (pico-USD per token, the
 * call's cost rounded up to a micro-USD once).
 */
export function providerBooks(
  records: readonly RequestRecord[],
  prices: Prices | ((r: RequestRecord) => Prices),
): Books {
  const books = empty();
  for (const r of records) {
    // A provider that bills by service tier: the prices of the tier each call was served at.
    const p = typeof prices === 'function' ? prices(r) : prices;
    const uncached =
      r.promptTokens -
      r.cachedTokens -
      r.cacheWrite5mTokens -
      r.cacheWrite1hTokens -
      r.audioPromptTokens;
    const pico =
      uncached * p.input +
      r.cachedTokens * p.cachedInput +
      r.cacheWrite5mTokens * p.cacheWrite5m +
      r.cacheWrite1hTokens * p.cacheWrite1h +
      r.audioPromptTokens * p.audioInput +
      (r.completionTokens - r.audioCompletionTokens) * p.output +
      r.audioCompletionTokens * p.audioOutput;
    books.calls++;
    books.prompt += r.promptTokens;
    books.cached += r.cachedTokens;
    books.write5m += r.cacheWrite5mTokens;
    books.write1h += r.cacheWrite1hTokens;
    books.completion += r.completionTokens;
    books.reasoning += r.reasoningTokens;
    books.audioPrompt += r.audioPromptTokens;
    books.audioCompletion += r.audioCompletionTokens;
    books.microUsd += Math.ceil(pico / 1_000_000);
  }
  return books;
}

/**
 * The provider's bill: the tokens at the model's prices (providerBooks) and each call's
 * tool uses at their fees, as the authority rounds them (a call's fee rounded up once).
 */
export function withFees(
  records: readonly RequestRecord[],
  price: PriceConfig & { toolUses: Partial<Record<ToolUseKind, number>> },
  api: 'openai' | 'anthropic',
) {
  const books = providerBooks(records, modelPrices(price, api));
  const perK = toolUsePrices({ price });
  const fees = records.reduce((n, r) => n + toolFeeMicroUsd(perK, r.toolUses), 0);
  const uses = records.reduce(
    (n, r) => n + Object.values(r.toolUses).reduce((a, b) => a + b, 0),
    0,
  );
  return { books: { ...books, microUsd: books.microUsd + fees }, fees, uses };
}

function empty(): Books {
  return {
    calls: 0,
    prompt: 0,
    cached: 0,
    write5m: 0,
    write1h: 0,
    completion: 0,
    reasoning: 0,
    audioPrompt: 0,
    audioCompletion: 0,
    microUsd: 0,
  };
}

/** The aggregator of a test: the test's NATS names and ClickHouse database, fast flushes. */
export async function startTestAggregator(infra: {
  natsUrl: string;
  clickhouseUrl: string;
  names: NatsNames;
  database: string;
}): Promise<Aggregator> {
  const config = loadConfig({
    NATS_URL: infra.natsUrl,
    CLICKHOUSE_URL: infra.clickhouseUrl,
    CLICKHOUSE_DATABASE: infra.database,
    BILLING_AGGREGATOR_OPS_PORT: '0',
    BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '0',
    BILLING_AGGREGATOR_FLUSH_INTERVAL_MS: '100',
    ...natsNamesToEnv(infra.names),
  });
  const logger = createLogger({ name: 'aggregator-test', level: 'silent' });
  return startAggregator({ config, logger, quietClickHouse: true });
}

/**
 * The books as ClickHouse has them, once every settlement of the tenant is in: the settled
 * rows (what each category was, and the surfaces recorded), and what the windows were charged
 * by the surface's row of the by-api view (what the dashboards show).
 */
export async function clickhouseBooks(
  ch: SqlExecutor,
  database: string,
  tenant: string,
  api: ApiSurface,
  calls: number,
): Promise<Books & { charged: number; chargedMicroUsd: number; apis: string[] }> {
  const raw = qualified(database, 'events_raw_v1');
  const settled = sql`tenant = ${tenant} AND type = 'reservation.settled'`;
  await waitFor(
    async () => {
      const [r] = await ch.query<{ n: string }>(
        sql`SELECT count() AS n FROM ${raw} FINAL WHERE ${settled}`,
      );
      return Number(r?.n) === calls;
    },
    { what: `${calls} settlements in ClickHouse`, timeoutMs: 20_000 },
  );
  const [s] = await ch.query<Record<string, unknown>>(sql`
    SELECT count() AS calls, sum(prompt_tokens) AS prompt, sum(cached_prompt_tokens) AS cached,
      sum(cache_write_5m_tokens) AS write5m, sum(cache_write_1h_tokens) AS write1h,
      sum(completion_tokens) AS completion, sum(reasoning_tokens) AS reasoning,
      sum(audio_prompt_tokens) AS audioPrompt, sum(audio_completion_tokens) AS audioCompletion,
      sum(cost_micro_usd) AS microUsd, groupUniqArray(api) AS apis
    FROM ${raw} FINAL WHERE ${settled}`);
  const [v] = await ch.query<Record<string, unknown>>(sql`
    SELECT sum(tokens_day) AS charged, sum(cost_micro_usd_day) AS chargedMicroUsd
    FROM ${qualified(database, 'usage_by_api_daily_v1')} WHERE tenant = ${tenant} AND api = ${api}`);
  const n = (x: unknown) => Number(x ?? 0);
  return {
    calls: n(s?.calls),
    prompt: n(s?.prompt),
    cached: n(s?.cached),
    write5m: n(s?.write5m),
    write1h: n(s?.write1h),
    completion: n(s?.completion),
    reasoning: n(s?.reasoning),
    audioPrompt: n(s?.audioPrompt),
    audioCompletion: n(s?.audioCompletion),
    microUsd: n(s?.microUsd),
    apis: (s?.apis as string[] | undefined) ?? [],
    charged: n(v?.charged),
    chargedMicroUsd: n(v?.chargedMicroUsd),
  };
}

/**
 * Runs `body` with the test's aggregator and a ClickHouse client of its database, both
 * stopped afterwards whatever happens.
 */
export async function withAggregator(
  fx: {
    natsUrl: string;
    clickhouseUrl: string;
    clickhouse: ClickHouseClient;
    iso: { names: NatsNames; database: string };
  },
  body: (ch: ReturnType<typeof testClickHouse>) => Promise<void>,
): Promise<void> {
  void fx.clickhouse; // creates the test's database, dropped afterwards
  const aggregator = await startTestAggregator({
    natsUrl: fx.natsUrl,
    clickhouseUrl: fx.clickhouseUrl,
    names: fx.iso.names,
    database: fx.iso.database,
  });
  const ch = testClickHouse(fx.clickhouseUrl);
  try {
    await body(ch);
  } finally {
    await ch.close();
    await aggregator.stop();
  }
}

/** ClickHouse for a test's database (the aggregator's own client). */
export function testClickHouse(url: string): SqlExecutor & { close(): Promise<void> } {
  return createClickHouse({ url, username: 'default', password: '', quiet: true });
}

/** The drift audit's verdict after quiescence: the authority's counters against ClickHouse. */
export async function auditDrift(s: Stack, ch: SqlExecutor, database: string) {
  const r = await runAudit({ ch, database, authority: s.client });
  if (!r.ok) throw new Error(r.error.message);
  return r.value.maxDrift;
}

/**
 * The books of a run against a usd budget (and a tokens one, when given) until it refused, as
 * the provider bills it (the mock's log priced by `providerBooks`): never over either budget
 * and most of the one that bound used, every refusal a budget_exceeded, every call served
 * completed; the ledger and ClickHouse (its settled rows and the surface's by-api view) agree
 * with the provider to the token and micro-dollar, the drift audit finds nothing, and no hold
 * was overrun.
 */
export async function expectBooksHold(
  s: Stack,
  ch: SqlExecutor,
  database: string,
  run: {
    tenant: string;
    api: ApiSurface;
    budgetUsd: number;
    budgetTokens?: number;
    result: WorkloadResult;
  },
  provider: Books,
): Promise<void> {
  const { tenant, budgetUsd, budgetTokens, result } = run;
  const records = s.upstream.stats().recent;
  const tokens = provider.prompt + provider.completion;
  expect(provider.microUsd).toBeLessThanOrEqual(budgetUsd * 1e6);
  if (budgetTokens !== undefined) expect(tokens).toBeLessThanOrEqual(budgetTokens);
  const used = Math.max(provider.microUsd / (budgetUsd * 1e6), tokens / (budgetTokens ?? Infinity));
  expect(used).toBeGreaterThan(0.7);
  expect(result.refused).toBeGreaterThan(0);
  expect(result.codes).toEqual({ budget_exceeded: result.refused });
  expect(provider.calls).toBe(result.served);
  expect(records.every((r) => r.outcome === 'completed')).toBe(true);
  const ledger = await s.settled(tenant);
  expect({ tokens: ledger.billedTokens, microUsd: ledger.billedMicroUsd }).toEqual({
    tokens,
    microUsd: provider.microUsd,
  });
  const books = await clickhouseBooks(ch, database, tenant, run.api, result.served);
  const { charged: _c, chargedMicroUsd, apis: _a, ...rows } = books;
  expect(rows).toEqual(provider);
  expect(chargedMicroUsd).toBe(provider.microUsd);
  expect(await auditDrift(s, ch, database)).toEqual({ tokens: 0, usd: 0 });
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === result.served,
  );
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
}

/** What each side billed one team (tokens or micro-USD, the limit's unit). */
export interface TeamBills {
  /** What Holdfast billed (its settlements). */
  holdfast: (team: string) => number;
  /** What the provider billed (the mock upstream's log). */
  provider: (team: string) => number;
  /** What the provider billed past Holdfast on calls cut short (the unread residual). */
  unread: (team: string) => number;
  /** What Holdfast billed past holds, recorded as overruns. */
  overrun?: (team: string) => number;
}

/**
 * A limit held over `teams` together: what Holdfast billed is within it but for the overruns
 * it recorded, and what the provider billed is within that but for the tokens written into
 * connections the edge had hung up on (docs/budgets.md, "What Holdfast cannot see").
 */
export function expectLimitHeld(teams: readonly string[], limit: number, bills: TeamBills): void {
  const sum = (f: (team: string) => number) => teams.reduce((n, t) => n + f(t), 0);
  const over = bills.overrun ? sum(bills.overrun) : 0;
  const who = teams.join('+');
  expect(sum(bills.holdfast), who).toBeLessThanOrEqual(limit + over);
  expect(sum(bills.provider), who).toBeLessThanOrEqual(limit + over + sum(bills.unread));
}

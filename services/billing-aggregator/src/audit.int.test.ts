import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { AuthorityClient } from '@holdfast/runtime';
import { startService, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { settledCall } from '../test/events.js';
import { aggregatorTest as test } from '../test/fixture.js';
import { aggregatorConfig, aggregatorEnv, silent } from '../test/harness.js';
import { runAudit, type AuditReport } from './audit.js';
import { startAggregator } from './index.js';
import { toEventRow } from './rows.js';
import { qualified } from './sql.js';

const AUTHORITY_MAIN = fileURLToPath(
  new URL('../../budget-authority/dist/main.js', import.meta.url),
);
const AUDIT_CLI = fileURLToPath(new URL('../dist/cli/audit.js', import.meta.url));

const useCases = [{ id: 'uc', maxTokens: 1_000, models: ['gpt-4o-mini', 'gpt-4o'] }];
const CONFIG = {
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    {
      id: 'gpt-4o-mini',
      upstream: 'default',
      price: { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
    },
    { id: 'gpt-4o', upstream: 'default', price: { inputPerMTok: 2.5, outputPerMTok: 10 } },
  ],
  tenants: [
    { id: 'acme', budgets: [{ window: 'month', limit: 10_000_000 }], useCases },
    {
      id: 'team-a',
      parent: 'acme',
      budgets: [
        { window: 'minute', limit: 500_000 },
        { window: 'day', limit: 5, unit: 'usd' },
      ],
      useCases,
    },
    {
      id: 'team-b',
      parent: 'acme',
      mode: 'estimate',
      budgets: [{ window: 'month', limit: 500_000, calendar: true }],
      useCases,
    },
    { id: 'solo', budgets: [{ window: 'day', limit: 4_000 }], useCases },
  ],
};

function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [AUDIT_CLI, ...args],
      { env: { ...process.env, ...env } },
      (err, stdout) => {
        const code = err ? Number((err as { code?: number }).code ?? 1) : 0;
        resolve({ code, stdout });
      },
    );
  });
}

/** Calls through the real authority: settled, released, left open, refused. */
async function workload(client: AuthorityClient): Promise<{ admitted: number; refused: number }> {
  const tenants = ['team-a', 'team-b', 'solo'];
  let admitted = 0;
  let refused = 0;
  for (let i = 0; i < 60; i++) {
    const tenant = tenants[i % 3]!;
    const reservationId = randomUUID();
    const r = await client.admit({
      reservationId,
      tenant,
      keyId: null,
      useCase: 'uc',
      model: i % 4 === 0 ? 'gpt-4o' : 'gpt-4o-mini',
      promptTokens: 100 + i,
      maxTokens: 200,
    });
    if (!r.ok) throw new Error(r.error.message);
    if (!r.value.admitted) {
      refused++;
      continue;
    }
    admitted++;
    if (i % 10 === 7) {
      await client.release({ reservationId, tenant, reason: 'upstream_error' });
    } else if (i % 10 !== 9) {
      const s = await client.settle({
        reservationId,
        tenant,
        usage: { promptTokens: 100 + i, completionTokens: (i * 37) % 200 },
      });
      if (!s.ok) throw new Error(s.error.message);
    }
  }
  return { admitted, refused };
}

test('drift audit: the authority and ClickHouse agree to the token after quiescence; injected drift fails the command', async ({
  nc,
  infra,
  ch,
  redisUrl,
  redis: _redis,
  iso,
}) => {
  const dir = await mkdtemp(join(tmpdir(), 'holdfast-audit-'));
  const configFile = join(dir, 'holdfast.json');
  await writeFile(configFile, JSON.stringify(CONFIG));
  const authority = await startService(AUTHORITY_MAIN, {
    NATS_URL: infra.natsUrl,
    REDIS_URL: redisUrl,
    HOLDFAST_CONFIG: configFile,
    HOLDFAST_KEY_PREFIX: iso.keyPrefix,
    AUTHORITY_OPS_PORT: '0',
    ...natsNamesToEnv(iso.names),
  });
  const agg = await startAggregator({
    config: aggregatorConfig(infra, { BILLING_AGGREGATOR_AUDIT_INTERVAL_MS: '300' }),
    logger: silent,
  });
  try {
    const client = new AuthorityClient({ nc, names: iso.names, timeoutMs: 5_000 });
    const { admitted, refused } = await workload(client);
    expect(admitted).toBeGreaterThan(30);
    expect(refused).toBeGreaterThan(0); // solo ran out of its day budget

    // Quiescence: every event relayed and inserted, then the books balance exactly.
    let report: AuditReport | undefined;
    await waitFor(
      async () => {
        const r = await runAudit({ ch, database: iso.database, authority: client });
        report = r.ok ? r.report : undefined;
        return report && report.maxDrift.tokens === 0 && report.maxDrift.usd === 0;
      },
      { timeoutMs: 30_000, what: 'zero drift' },
    );
    if (!report) throw new Error('no report');
    const counters = report.rows.map((r) => `${r.tenant}/${r.counter}`);
    expect(counters).toEqual(
      expect.arrayContaining([
        'acme/month-tokens',
        'acme/lifetime-tokens',
        'team-a/minute-tokens',
        'team-a/day-usd',
        'team-b/month-tokens',
        'solo/day-tokens',
      ]),
    );
    const acme = report.rows.find((r) => r.tenant === 'acme' && r.counter === 'month-tokens');
    expect(acme?.authority).toBeGreaterThan(0);
    expect(report.rows.find((r) => r.counter === 'day-usd')?.authority).toBeGreaterThan(0);

    // Under traffic: the snapshot at T against the events up to T, once they had time to land.
    let traffic = true;
    let callsDuring = 0;
    const load = (async () => {
      while (traffic) {
        const id = randomUUID();
        const a = await client.admit({
          reservationId: id,
          tenant: 'team-a',
          keyId: null,
          useCase: 'uc',
          model: 'gpt-4o-mini',
          promptTokens: 40,
          maxTokens: 20,
        });
        if (a.ok && a.value.admitted) {
          await client.settle({
            reservationId: id,
            tenant: 'team-a',
            usage: { promptTokens: 40, completionTokens: 10 },
          });
          callsDuring++;
        }
      }
    })();
    try {
      const before = callsDuring;
      await waitFor(
        async () => {
          const r = await runAudit({
            ch,
            database: iso.database,
            authority: client,
            settleMs: 1_500,
          });
          return r.ok && r.report.maxDrift.tokens === 0 && r.report.maxDrift.usd === 0;
        },
        { timeoutMs: 30_000, what: 'zero drift under traffic' },
      );
      expect(callsDuring).toBeGreaterThan(before);
    } finally {
      traffic = false;
      await load;
    }

    // The periodic job ran and found nothing.
    await waitFor(
      async () =>
        (
          await agg.registry.getSingleMetric('holdfast_aggregator_audits_total')?.get()
        )?.values.some((v) => v.labels.result === 'ok' && v.value > 0),
      { what: 'a periodic audit without drift' },
    );

    // The command: exit 0 and a table.
    const env = aggregatorEnv(infra);
    const ok = await runCli(['--wait', '10000'], env);
    expect(ok.stdout).toMatch(/acme\s+month-tokens\s+\d+\s+\d+\s+0/);
    expect(ok.code).toBe(0);

    // Seven tokens ClickHouse has and the authority never billed: drift, exit 1.
    const [, ghost] = settledCall({
      tenant: 'team-a',
      org: 'acme',
      prompt: 5,
      completion: 2,
      atMs: Date.now() - 5_000,
    });
    await ch.insert(qualified(iso.database, 'events_raw_v1'), [toEventRow(ghost, 0)]);
    const drift = await runCli(['--tenant', 'team-a'], env);
    expect(drift.stdout).toMatch(/team-a\s+lifetime-tokens\s+\d+\s+\d+\s+\+7/);
    expect(drift.code).toBe(1);
    expect((await runCli(['--tenant', 'team-a', '--threshold', '7'], env)).code).toBe(0);
  } finally {
    await agg.stop();
    await authority.stop();
  }
});

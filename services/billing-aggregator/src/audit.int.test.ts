import { randomUUID } from 'node:crypto';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { auditTest as test, runCli, workload } from '../test/audit-stack.js';
import { settledCall } from '../test/events.js';
import { aggregatorEnv } from '../test/harness.js';
import { runAudit, type AuditReport } from './audit.js';
import { toEventRow } from './rows.js';
import { qualified } from './sql.js';

test('drift audit: the authority and ClickHouse agree to the token after quiescence; injected drift fails the command', async ({
  audited: { client, agg },
  infra,
  ch,
  iso,
}) => {
  const { admitted, refused } = await workload(client);
  expect(admitted).toBeGreaterThan(30);
  expect(refused).toBeGreaterThan(0); // solo ran out of its day budget

  // Quiescence: every event relayed and inserted, then the books balance exactly.
  let report: AuditReport | undefined;
  await waitFor(
    async () => {
      const r = await runAudit({ ch, database: iso.database, authority: client });
      report = r.ok ? r.value : undefined;
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
        return r.ok && r.value.maxDrift.tokens === 0 && r.value.maxDrift.usd === 0;
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
      (await agg.registry.getSingleMetric('holdfast_aggregator_audits_total')?.get())?.values.some(
        (v) => v.labels.result === 'ok' && v.value > 0,
      ),
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
});

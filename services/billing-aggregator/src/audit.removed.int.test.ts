import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { auditTest as test, CONFIG, runCli, workload } from '../test/audit-stack.js';
import { aggregatorEnv } from '../test/harness.js';
import { runAudit } from './audit.js';

test('teams the config no longer has (as after pnpm experiment) are listed apart: no drift, no warning, exit 0', async ({
  audited: { client, agg },
  infra,
  ch,
  iso,
}) => {
  await workload(client);
  await waitFor(
    async () => {
      const r = await runAudit({ ch, database: iso.database, authority: client });
      return r.ok && r.value.maxDrift.tokens === 0 && r.value.maxDrift.usd === 0;
    },
    { timeoutMs: 30_000, what: 'zero drift before the removal' },
  );

  // What the experiment does at its end: a config without its teams. Here solo (a root)
  // and team-b (a team of acme, which stays) go; both were billed.
  const document = {
    ...CONFIG,
    tenants: CONFIG.tenants.filter((t) => !['solo', 'team-b'].includes(t.id)),
  };
  const applied = await client.configApply({ document, source: 'test: the experiment ends' });
  expect(applied.ok).toBe(true);

  const r = await runAudit({ ch, database: iso.database, authority: client });
  if (!r.ok) throw new Error(r.error.message);
  expect(r.value.maxDrift).toEqual({ tokens: 0, usd: 0 });
  expect(r.value.rows.map((x) => x.tenant)).not.toContain('solo');
  // acme's counters still hold team-b's usage, and ClickHouse still counts it for acme.
  expect(
    r.value.rows.find((x) => x.tenant === 'acme' && x.counter === 'lifetime-tokens'),
  ).toMatchObject({ drift: 0 });
  expect(r.value.removed.map((x) => x.tenant).sort()).toEqual(['solo', 'team-b']);
  expect(r.value.removed.every((x) => x.lifetimeTokens > 0)).toBe(true);

  const out = await runCli([], aggregatorEnv(infra));
  expect(out.code).toBe(0);
  expect(out.stdout).toContain(
    'not in the config any more (billed before they were removed; no counters to compare, not drift):',
  );
  expect(out.stdout).toMatch(/\n {2}solo {2}[\d,]+ tokens, \d+\.\d{6} USD/);
  expect(out.stdout).toMatch(/: ok\n/);

  // The periodic job: audits after the removal all find no drift, and the gauge stays 0.
  const audits = async (result: string) =>
    (await agg.registry.getSingleMetric('holdfast_aggregator_audits_total')?.get())?.values.find(
      (v) => v.labels.result === result,
    )?.value ?? 0;
  const [okBefore, repeatedBefore] = [await audits('ok'), await audits('drift_repeated')];
  await waitFor(async () => (await audits('ok')) >= okBefore + 2, {
    what: 'two more periodic audits',
  });
  // A race at one snapshot's instant may show once on a loaded box (documented); removed
  // tenants would show in every run.
  expect(await audits('drift_repeated')).toBe(repeatedBefore);
  const gauge = await agg.registry.getSingleMetric('holdfast_aggregator_audit_drift')?.get();
  expect(gauge?.values.map((v) => v.value)).toEqual([0, 0]);
});

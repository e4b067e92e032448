import { expect, onTestFinished } from 'vitest';
import { BASE_CONFIG, authorityTest as test } from './harness.js';
import { startTestAuthority } from '../src/testing.js';

const withLimit = (limit: number) => ({
  ...BASE_CONFIG,
  tenants: BASE_CONFIG.tenants.map((t) =>
    t.id === 'support-bot' ? { ...t, budgets: [{ window: 'month', limit, unit: 'tokens' }] } : t,
  ),
});

test('config.apply with expectedVersion: applied when current, version_conflict when stale', async ({
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const current = await h.client.configGet();
  if (!current.ok) throw new Error(current.error.message);
  const v = current.value.version;

  const first = await h.client.configApply({ document: withLimit(1_000), expectedVersion: v });
  expect(first.ok && first.value).toMatchObject({ version: v + 1, changed: true });

  // A second writer that read version v too is refused, and nothing changes.
  const stale = await h.client.configApply({ document: withLimit(2_000), expectedVersion: v });
  expect(stale.ok).toBe(false);
  expect(stale.ok ? '' : stale.error.code).toBe('version_conflict');
  expect(stale.ok ? '' : stale.error.message).toContain(`version ${v + 1}, not the expected ${v}`);
  // Even a document equal to the stored one is refused at a stale version.
  const same = await h.client.configApply({ document: withLimit(1_000), expectedVersion: v });
  expect(same.ok ? '' : same.error.code).toBe('version_conflict');

  const after = await h.client.configGet();
  expect(after.ok && after.value.version).toBe(v + 1);
  const budgets = after.ok
    ? (after.value.config as typeof BASE_CONFIG).tenants.find((t) => t.id === 'support-bot')
        ?.budgets
    : [];
  expect(budgets?.[0]?.limit).toBe(1_000);

  // Without expectedVersion the last writer wins, as before.
  const blind = await h.client.configApply({ document: withLimit(3_000) });
  expect(blind.ok && blind.value.version).toBe(v + 2);
});

test('concurrent applies at the same expectedVersion: exactly one wins', async ({ start }) => {
  const h = await start(BASE_CONFIG);
  const current = await h.client.configGet();
  const v = current.ok ? current.value.version : -1;
  const results = await Promise.all(
    [1_000, 2_000, 3_000, 4_000, 5_000].map((limit) =>
      h.client.configApply({ document: withLimit(limit), expectedVersion: v }),
    ),
  );
  expect(results.filter((r) => r.ok)).toHaveLength(1);
  expect(results.filter((r) => !r.ok && r.error.code === 'version_conflict')).toHaveLength(4);
  const after = await h.client.configGet();
  expect(after.ok && after.value.version).toBe(v + 1);
});

test('concurrent applies without expectedVersion all succeed, one version each', async ({
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const current = await h.client.configGet();
  const v = current.ok ? current.value.version : -1;
  const results = await Promise.all(
    [1_000, 2_000, 3_000, 4_000].map((limit) =>
      h.client.configApply({ document: withLimit(limit) }),
    ),
  );
  const versions = results.map((r) => (r.ok ? r.value.version : r.error.code)).sort();
  expect(versions).toEqual([v + 1, v + 2, v + 3, v + 4]);
});

test('config.get answers the stored version on every replica, even before its notice', async ({
  start,
  redisUrl,
  nc,
  natsUrl,
  iso,
}) => {
  const a = await start(BASE_CONFIG);
  const b = await startTestAuthority({
    natsUrl,
    redisUrl,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: BASE_CONFIG,
  });
  onTestFinished(() => b.stop());
  // Applied on replica a without the config.changed notice: b has not heard of it.
  const applied = await a.authority.ctx.config.apply(withLimit(7_000), 'test');
  const version = applied.ok ? applied.value.version : -1;
  expect(b.authority.ctx.config.version).toBe(version - 1);
  // The queue group spreads these over both replicas; every answer is the new version.
  const answers = await Promise.all(Array.from({ length: 20 }, () => a.client.configGet()));
  expect(new Set(answers.map((r) => (r.ok ? r.value.version : r.error.code)))).toEqual(
    new Set([version]),
  );
});

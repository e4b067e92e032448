import { CONFIG_LIMITS, parseConfig } from '@holdfast/config';
import { expect } from 'vitest';
import { BASE_CONFIG, authorityTest as test } from './harness.js';
import { Keys } from '../src/keys.js';

const tenants = (n: number) => [
  ...BASE_CONFIG.tenants,
  ...Array.from({ length: n - BASE_CONFIG.tenants.length }, (_, i) => ({ id: `team-${i}` })),
];

test('config.apply past a list limit: invalid_config naming it, nothing stored; at the limit it applies', async ({
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const before = await h.client.configGet();
  if (!before.ok) throw before.error;

  const over = await h.client.configApply({
    document: { ...BASE_CONFIG, tenants: tenants(CONFIG_LIMITS.tenants + 1) },
  });
  expect(over.ok).toBe(false);
  expect(over.ok ? '' : over.error.code).toBe('invalid_config');
  expect(over.ok ? '' : over.error.message).toBe(
    'tenants: at most 1,000 tenants (docs/configuration.md#limits)',
  );
  const seventh = { window: 'minute', limit: 1, unit: 'tokens' };
  const budgets = await h.client.configApply({
    document: {
      ...BASE_CONFIG,
      tenants: BASE_CONFIG.tenants.map((t) => ({
        ...t,
        budgets: [
          ...['minute', 'day', 'month'].flatMap((window) =>
            ['tokens', 'usd'].map((unit) => ({ window, limit: 1_000, unit })),
          ),
          seventh,
        ],
      })),
    },
  });
  expect(budgets.ok ? '' : budgets.error.message).toContain(
    'tenants[id=batch-summariser].budgets: at most 6 budgets, one per window and unit',
  );
  const unchanged = await h.client.configGet();
  expect(unchanged.ok && unchanged.value.version).toBe(before.value.version);
  expect(unchanged.ok && unchanged.value.hash).toBe(before.value.hash);
  expect(h.authority.ctx.config.current.tenants.size).toBe(2);

  const at = await h.client.configApply({
    document: { ...BASE_CONFIG, tenants: tenants(CONFIG_LIMITS.tenants) },
  });
  expect(at.ok && at.value).toMatchObject({ version: before.value.version + 1, changed: true });
  expect(h.authority.ctx.config.current.tenants.size).toBe(1_000);
});

test('a config stored before a limit existed (over it) still loads; it only cannot grow', async ({
  start,
  redis,
  iso,
}) => {
  const h = await start(BASE_CONFIG);
  const over = { ...BASE_CONFIG, tenants: tenants(CONFIG_LIMITS.tenants + 1) };
  // As an older authority stored it: the document and a newer version, written as it is.
  const parsed = parseConfig(over, 'old', { limits: false });
  if (!parsed.ok) throw parsed.error;
  const keys = new Keys(iso.keyPrefix);
  await redis.mset(keys.config, JSON.stringify(parsed.value.raw), keys.configVersion, '100');
  expect(await h.authority.ctx.config.refresh()).toBe(true);
  expect(h.authority.ctx.config.current.tenants.size).toBe(1_001);
  const got = await h.client.configGet();
  expect(got.ok && got.value.version).toBe(100);

  // An edit of it is a new document: held to the limits, refused, nothing changed.
  const edit = await h.client.configApply({ document: over, expectedVersion: 100 });
  expect(edit.ok ? '' : edit.error.code).toBe('invalid_config');
  expect(h.authority.ctx.config.version).toBe(100);
});

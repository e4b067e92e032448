import { CONFIG_LIMITS } from '@holdfast/config';
import { expect } from 'vitest';
import { BASE_CONFIG, authorityTest as test } from './harness.js';

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

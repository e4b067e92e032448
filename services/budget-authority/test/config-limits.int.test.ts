import { randomBytes } from 'node:crypto';
import { CONFIG_LIMITS, parseConfig } from '@holdfast/config';
import { CONFIG_CHANGES_LISTED } from '@holdfast/events';
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

test('thousands of keys made through the admin API: config.get still fits one NATS message, its list of changes bounded', async ({
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const teams = Array.from({ length: 6 }, (_, t) => ({
    id: `team-${t}`,
    budgets: [{ window: 'month', limit: 1_000_000 }],
    useCases: [{ id: 'uc', maxTokens: 100, models: ['gpt-4o-mini'] }],
    keys: [] as { id: string; sha256: string }[],
  }));
  // The config file: six teams without keys, the base of what the admin API changes.
  const doc = { ...BASE_CONFIG, tenants: [...BASE_CONFIG.tenants, ...teams] };
  const declared = await h.client.configApply({ document: doc, mode: 'merge' });
  expect(declared.ok).toBe(true);
  // Then 5,280 keys created through the admin API (880 a team; each edit here does what 880
  // POST /admin/tenants/{t}/keys do, one read-modify-write of the document each): the document
  // stays within its limit (about 725 KiB of 768), and each key is one change since the file.
  for (const team of teams) {
    for (let k = 0; k < 880; k++) {
      team.keys.push({ id: `${team.id}-key-${k}`, sha256: randomBytes(32).toString('hex') });
    }
    const edit = await h.client.configApply({ document: doc });
    expect(edit.ok ? '' : edit.error.message).toBe('');
  }
  // Every edge and the alerter load the config with config.get: it must still answer (the whole
  // list of changes, some 370 KB, made it 1.1 MB, over max_payload: reply_too_large, so no edge
  // loaded the keys, nor a key deleted since, nor anything after).
  const got = await h.client.configGet();
  expect(got.ok ? '' : got.error.message).toBe('');
  if (!got.ok) return;
  expect(got.value.version).toBe(h.authority.ctx.config.version);
  expect(got.value.divergence).toHaveLength(CONFIG_CHANGES_LISTED);
  expect(got.value.divergence[0]).toEqual({
    path: 'tenants[id=team-0].keys[id=team-0-key-0]',
    change: 'added',
  });
  expect(got.value.divergenceCount).toBe(5_280);
  // The file applied again keeps every key, and says how many (listing the first 500).
  const file = { ...doc, tenants: doc.tenants.map((t) => ({ ...t, keys: [] })) };
  const again = await h.client.configApply({ document: file, mode: 'merge' });
  expect(again.ok ? '' : again.error.message).toBe('');
  if (!again.ok) return;
  expect(again.value).toMatchObject({ changed: false, keptCount: 5_280, overriddenCount: 0 });
  expect(again.value.kept).toHaveLength(CONFIG_CHANGES_LISTED);
});

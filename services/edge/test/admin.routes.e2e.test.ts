import { expect } from 'vitest';
import { admin, ids, withAdmin } from './admin.js';
import { edgeTest as test } from './harness.js';

test('every admin route answers its happy path and each change is a new config version', async ({
  stack,
}) => {
  const s = await stack(withAdmin());
  const call = admin(s);

  const cfg = await call('GET', '/admin/config');
  expect(cfg.status).toBe(200);
  let version: number = cfg.body.version;
  expect(version).toBeGreaterThanOrEqual(1);
  expect(ids(cfg.body.config.tenants)).toEqual([
    'batch-summariser',
    'support-bot',
    'finance-ops',
    'multi',
  ]);
  /** Expects a change to have produced the next version. */
  const next = (r: { body: { config: { version: number; changed: boolean } } }) => {
    expect(r.body.config).toMatchObject({ version: version + 1, changed: true });
    version += 1;
  };

  const tenants = await call('GET', '/admin/tenants');
  expect(tenants.status).toBe(200);
  expect(tenants.body.data).toHaveLength(4);
  expect(tenants.body.data[0].keys).toEqual([
    {
      id: 'batch-1',
      tenant: 'batch-summariser',
      defaultUseCase: null,
      budgets: [],
      allowUserHeader: false,
      maxEndUsers: null,
    },
  ]);

  // Tenants: create, read, patch (null removes a setting).
  const created = await call('POST', '/admin/tenants', {
    id: 'research',
    mode: 'reserve',
    maxInFlight: 8,
    budgets: [{ window: 'day', limit: 10_000 }],
    useCases: [{ id: 'UC-200', maxTokens: 256, models: ['gpt-4o-mini'] }],
  });
  expect(created.status).toBe(201);
  expect(created.body.data).toMatchObject({ id: 'research', maxInFlight: 8, failOpen: false });
  next(created);
  expect((await call('GET', '/admin/tenants/research')).body.data.budgets).toEqual([
    expect.objectContaining({ window: 'day', limit: 10_000, unit: 'tokens', soft: [0.8, 0.95] }),
  ]);
  const patched = await call('PATCH', '/admin/tenants/research', {
    mode: 'post',
    maxInFlight: null,
  });
  expect(patched.status).toBe(200);
  expect(patched.body.data.mode).toBe('post');
  expect(patched.body.data).not.toHaveProperty('maxInFlight');
  next(patched);

  // Budgets: PUT creates (201), PUT again replaces (200), DELETE removes.
  const budget = await call('PUT', '/admin/tenants/research/budgets/month-usd', { limit: 2.5 });
  expect(budget.status).toBe(201);
  expect(budget.body.data).toMatchObject({
    id: 'month-usd',
    window: 'month',
    unit: 'usd',
    limit: 2.5,
  });
  next(budget);
  const replaced = await call('PUT', '/admin/tenants/research/budgets/month-usd', {
    limit: 3,
    soft: [0.5],
    enforce: false,
  });
  expect(replaced.status).toBe(200);
  next(replaced);
  const budgets = await call('GET', '/admin/tenants/research/budgets');
  expect(ids(budgets.body.data)).toEqual(['day-tokens', 'month-usd']);
  expect(ids(budgets.body.data, 'limit')).toEqual(['10000', '3']);
  next(await call('DELETE', '/admin/tenants/research/budgets/month-usd'));

  // Use cases.
  const useCase = await call('PUT', '/admin/tenants/research/use-cases/UC-201', {
    maxTokens: 64,
    models: ['gpt-4o-mini'],
  });
  expect(useCase.status).toBe(201);
  next(useCase);
  const useCases = await call('GET', '/admin/tenants/research/use-cases');
  expect(ids(useCases.body.data)).toEqual(['UC-200', 'UC-201']);
  next(await call('DELETE', '/admin/tenants/research/use-cases/UC-201'));

  // Keys: the secret comes once; lists show ids only.
  const key = await call('POST', '/admin/tenants/research/keys', {
    id: 'research-1',
    defaultUseCase: 'UC-200',
  });
  expect(key.status).toBe(201);
  expect(key.headers['cache-control']).toBe('no-store');
  expect(key.body.secret).toMatch(/^sk-hf-[A-Za-z0-9_-]{43}$/);
  expect(key.body.data).toEqual({
    id: 'research-1',
    tenant: 'research',
    defaultUseCase: 'UC-200',
    budgets: [],
    allowUserHeader: false,
    maxEndUsers: null,
  });
  next(key);
  const all = await call('GET', '/admin/keys');
  expect(all.body.data).toHaveLength(5);
  expect((await call('GET', '/admin/keys?tenant=research')).body.data).toEqual([key.body.data]);
  expect((await call('GET', '/admin/tenants/research/keys')).body.data).toEqual([key.body.data]);
  next(await call('DELETE', '/admin/tenants/research/keys/research-1'));
  expect((await call('GET', '/admin/tenants/research/keys')).body.data).toEqual([]);

  // Model prices.
  const models = await call('GET', '/admin/models');
  expect(ids(models.body.data)).toEqual(['gpt-4o-mini', 'text-embedding-3-small']);
  const price = await call('PUT', '/admin/models/gpt-4o-mini/price', {
    inputPerMTok: 0.2,
    outputPerMTok: 0.8,
  });
  expect(price.status).toBe(200);
  expect(price.body.data.price).toEqual({ inputPerMTok: 0.2, outputPerMTok: 0.8 });
  next(price);
  // Service tiers share the price's schema: priced tiers and the project's auto tier.
  const priority = { inputPerMTok: 0.4, outputPerMTok: 1.6 };
  const tiered = await call('PUT', '/admin/models/gpt-4o-mini/price', {
    ...{ inputPerMTok: 0.2, outputPerMTok: 0.8 },
    ...{ serviceTiers: { priority }, autoServiceTier: 'priority' },
  });
  expect(tiered.status).toBe(200);
  expect(tiered.body.data.price).toMatchObject({ serviceTiers: { priority } });
  next(tiered);
  for (const bad of [{ autoServiceTier: 'flex' }, { serviceTiers: { turbo: priority } }]) {
    const refused = await call('PUT', '/admin/models/gpt-4o-mini/price', {
      ...{ inputPerMTok: 0.2, outputPerMTok: 0.8 },
      ...bad,
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/autoServiceTier|serviceTiers/);
  }
  // Long-context prices too, on the base and a tier; one below its short price is a 400.
  const longContext = { aboveInputTokens: 272_000, inputPerMTok: 0.4, outputPerMTok: 1.2 };
  const long = await call('PUT', '/admin/models/gpt-4o-mini/price', {
    ...{ inputPerMTok: 0.2, outputPerMTok: 0.8, longContext },
    serviceTiers: {
      priority: { ...priority, longContext: { ...longContext, outputPerMTok: 2.4 } },
    },
  });
  expect(long.status).toBe(200);
  expect(long.body.data.price).toMatchObject({ longContext });
  next(long);
  for (const bad of [
    { longContext: { ...longContext, outputPerMTok: 0.5 } },
    { longContext: { ...longContext, aboveInputTokens: 0 } },
  ]) {
    const refused = await call('PUT', '/admin/models/gpt-4o-mini/price', {
      ...{ inputPerMTok: 0.2, outputPerMTok: 0.8 },
      ...bad,
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/longContext/);
  }
  // Tool fees too: priced kinds go through; an unknown kind or a negative fee is a 400.
  const toolUses = { web_search: 10, file_search: 2.5, image_generation: 170 };
  const fees = await call('PUT', '/admin/models/gpt-4o-mini/price', {
    ...{ inputPerMTok: 0.2, outputPerMTok: 0.8, toolUses },
  });
  expect(fees.status).toBe(200);
  expect(fees.body.data.price).toMatchObject({ toolUses });
  next(fees);
  for (const bad of [{ computer_use: 40 }, { web_search: -1 }, { web_search: '10' }]) {
    const refused = await call('PUT', '/admin/models/gpt-4o-mini/price', {
      ...{ inputPerMTok: 0.2, outputPerMTok: 0.8, toolUses: bad },
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/toolUses/);
  }

  // The whole document as text (JSON is YAML), unchanged: nothing changes. Then as JSON.
  const doc = (await call('GET', '/admin/config')).body.config as { tenants: { id: string }[] };
  const same = await call('PUT', '/admin/config', JSON.stringify(doc));
  expect(same.status).toBe(200);
  expect(same.body).toMatchObject({ version, changed: false });
  doc.tenants = doc.tenants.filter((t) => t.id !== 'multi');
  const json = await call('PUT', '/admin/config', doc);
  expect(json.status).toBe(200);
  expect(json.body).toMatchObject({ version: version + 1, changed: true });
  version += 1;

  const deleted = await call('DELETE', '/admin/tenants/research');
  expect(deleted.status).toBe(200);
  expect(deleted.body.data).toEqual({ id: 'research', deleted: true });
  next(deleted);
  expect((await call('GET', '/admin/tenants')).body.data).toHaveLength(3);

  // Each change was recorded with the route that made it.
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'config.changed').length >= version,
  );
  const sources = events.flatMap((e) => (e.type === 'config.changed' ? [e.source] : []));
  expect(sources).toContain('admin:POST /admin/tenants');
  expect(sources).toContain('admin:POST /admin/tenants/:tenant/keys');
  expect(sources).toContain('admin:PUT /admin/config');
});

test('a YAML document applies as text, and the edge serves it at once', async ({ stack }) => {
  const s = await stack(withAdmin());
  const call = admin(s);
  const before = (await call('GET', '/admin/config')).body.version;
  const yaml = `
upstreams:
  - { id: default, baseUrl: "${s.upstream.url}" }
models:
  - { id: gpt-4o-mini, upstream: default, tokenizer: o200k_base, price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } }
tenants:
  - id: solo
    budgets: [{ window: month, limit: 1000 }]
    useCases: [{ id: UC-1, maxTokens: 16, models: [gpt-4o-mini] }]
`;
  const applied = await call('PUT', `/admin/config?expectedVersion=${before}`, yaml);
  expect(applied.status).toBe(200);
  expect(applied.body).toMatchObject({ version: before + 1, changed: true });
  expect([...(s.edge.app.configSnapshot.current?.tenants.keys() ?? [])]).toEqual(['solo']);
  expect(s.edge.app.configSnapshot.version).toBe(before + 1);
});

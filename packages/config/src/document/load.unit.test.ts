import { describe, expect, it } from 'vitest';
import { parseConfig } from './load.js';
import { holdInputPrice, holdOutputPrice, tierPrices } from './compile.js';

const base = {
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1', apiKeyEnv: 'OPENAI_API_KEY' }],
  models: [
    {
      id: 'gpt-4o-mini',
      upstream: 'default',
      tokenizer: 'o200k_base',
      maxOutputTokens: 16_384,
      price: { inputPerMTok: 0.15, outputPerMTok: 0.6, cachedInputPerMTok: 0.075 },
    },
  ],
  tenants: [
    {
      id: 'batch-summariser',
      parent: 'acme',
      maxInFlight: 32,
      budgets: [
        { window: 'month', limit: 40_000, unit: 'tokens', soft: [0.8, 0.95], grace: 0 },
        { window: 'minute', limit: 2.5, unit: 'usd' },
      ],
      useCases: [{ id: 'UC-112', maxTokens: 1_024, models: ['gpt-4o-mini'] }],
      keys: [{ id: 'batch-1', sha256: 'a'.repeat(64) }],
    },
    { id: 'acme', budgets: [{ window: 'day', limit: 1_000_000 }] },
  ],
  webhooks: [
    {
      id: 'finance',
      url: 'https://example.test/hook',
      secretEnv: 'HOOK_SECRET',
      events: ['threshold.crossed'],
    },
  ],
};

function errorsOf(doc: unknown): string[] {
  const r = parseConfig(doc);
  if (r.ok) throw new Error('expected errors');
  return r.error.errors;
}

describe('parseConfig', () => {
  it('accepts the documented example and compiles limits to integer base units', () => {
    const r = parseConfig(base);
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    const team = r.value.tenants.get('batch-summariser')!;
    expect(team.org).toBe('acme');
    expect(team.chain).toEqual(['batch-summariser', 'acme']);
    expect(team.mode).toBe('reserve');
    expect(team.budgets.map((b) => [b.id, b.limit])).toEqual([
      ['month-tokens', 40_000],
      ['minute-usd', 2_500_000],
    ]);
    expect(r.value.models.get('gpt-4o-mini')!.pricePico).toEqual({
      input: 150_000,
      output: 600_000,
      cachedInput: 75_000,
      cacheWrite5m: 150_000,
      cacheWrite1h: 150_000,
      audioInput: 150_000,
      audioOutput: 600_000,
    });
    expect(r.value.models.get('gpt-4o-mini')!.api).toBe('openai');
    expect(r.value.keysByHash.get('a'.repeat(64))).toEqual({
      tenant: 'batch-summariser',
      keyId: 'batch-1',
      defaultUseCase: undefined,
      allowUserHeader: false,
    });
  });

  it("compiles key and end-user budgets, and checks them like a team's", () => {
    const doc = structuredClone(base) as unknown as { tenants: Record<string, unknown>[] };
    const team = doc.tenants.find((t) => t.id === 'batch-summariser')!;
    team.keys = [
      {
        id: 'batch-1',
        sha256: 'a'.repeat(64),
        budgets: [{ window: 'day', limit: 5, unit: 'usd' }],
      },
    ];
    team.endUserBudgets = [{ window: 'day', limit: 20_000, unit: 'tokens' }];
    const r = parseConfig(doc);
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    const t = r.value.tenants.get('batch-summariser')!;
    expect(t.keyBudgets.get('batch-1')).toEqual([
      expect.objectContaining({
        id: 'day-usd',
        limit: 5_000_000,
        scope: 'key',
        subject: 'batch-1',
      }),
    ]);
    expect(t.endUserBudgets).toEqual([
      expect.objectContaining({
        id: 'day-tokens',
        limit: 20_000,
        scope: 'end_user',
        subject: null,
      }),
    ]);
    expect(t.maxEndUsers).toBe(10_000);
    team.endUserBudgets = [
      { window: 'day', limit: 1, unit: 'tokens' },
      { window: 'day', limit: 2.5, unit: 'tokens' },
    ];
    const errors = errorsOf(doc);
    expect(errors.join('\n')).toMatch(/endUserBudgets.*(duplicate|unique)/i);
    expect(errors.join('\n')).toMatch(/endUserBudgets.*integer/);
  });

  it('reads YAML text, and JSON as YAML', () => {
    expect(parseConfig('tenants:\n  - id: team\n').ok).toBe(true);
    expect(parseConfig(JSON.stringify(base)).ok).toBe(true);
  });

  it('names every bad field', () => {
    const errors = errorsOf({
      ...base,
      tenants: [
        {
          ...base.tenants[0],
          id: 'Batch',
          mode: 'yolo',
          budgets: [{ window: 'week', limit: -5 }],
          keys: [{ id: 'k', sha256: 'xyz' }],
        },
      ],
    });
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^tenants\[id=Batch\]\.id: /),
        expect.stringMatching(/^tenants\[id=Batch\]\.mode: /),
        expect.stringMatching(/^tenants\[id=Batch\]\.budgets\[week-tokens\]\.window: /),
        expect.stringMatching(/^tenants\[id=Batch\]\.budgets\[week-tokens\]\.limit: /),
        'tenants[id=Batch].keys[id=k].sha256: must be 64 lowercase hex digits',
      ]),
    );
  });

  it('checks references, duplicates and the hierarchy', () => {
    const errors = errorsOf({
      ...base,
      models: [{ ...base.models[0], upstream: 'nowhere' }],
      tenants: [
        {
          id: 'a',
          parent: 'b',
          useCases: [{ id: 'u', maxTokens: 1, models: ['ghost'] }],
          keys: [{ id: 'k', sha256: 'b'.repeat(64), defaultUseCase: 'nope' }],
        },
        {
          id: 'b',
          parent: 'a',
          budgets: [
            { window: 'day', limit: 1 },
            { window: 'day', limit: 2 },
          ],
        },
        { id: 'a', keys: [{ id: 'k', sha256: 'b'.repeat(64) }] },
        {
          id: 'c',
          parent: 'missing',
          budgets: [
            { window: 'minute', limit: 1.5 },
            { window: 'day', limit: 1, calendar: true },
          ],
        },
      ],
    });
    expect(errors).toEqual(
      expect.arrayContaining([
        'models[id=gpt-4o-mini].upstream: unknown upstream "nowhere"',
        // Two tenants share the id "a": they are named by position.
        'tenants[2].id: duplicate tenant id "a"',
        'tenants[0].useCases[id=u].models[0]: unknown model "ghost"',
        'tenants[0].keys[id=k].defaultUseCase: unknown use case "nope"',
        'tenants[2].keys[id=k].id: duplicate key id "k"',
        'tenants[2].keys[id=k].sha256: duplicate key hash "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"',
        'tenants[id=b].budgets[1]: duplicate budget window+unit "day-tokens"',
        'tenants[id=c].parent: unknown tenant "missing"',
        'tenants[id=c].budgets[minute-tokens].limit: a tokens limit must be an integer',
        'tenants[id=c].budgets[day-tokens].calendar: calendar applies to month windows only',
      ]),
    );
    expect(errors.some((e) => e.includes('cycle'))).toBe(true);
  });

  it('prices an anthropic model with cache writes at their own rates (explicit, else 1.25x and 2x)', () => {
    const doc = {
      upstreams: [
        ...base.upstreams,
        { id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' },
      ],
      models: [
        ...base.models,
        { id: 'claude-a', upstream: 'claude', price: { inputPerMTok: 3, outputPerMTok: 15 } },
        {
          id: 'claude-b',
          upstream: 'claude',
          price: { inputPerMTok: 3, outputPerMTok: 15, cacheWrite1hPerMTok: 7 },
          upstreamStateAllowanceTokens: 1_000,
        },
      ],
    };
    const r = parseConfig(doc);
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    expect(r.value.models.get('claude-a')).toMatchObject({
      api: 'anthropic',
      pricePico: {
        input: 3e6,
        output: 15e6,
        cachedInput: 3e6,
        cacheWrite5m: 3.75e6,
        cacheWrite1h: 6e6,
      },
    });
    expect(r.value.models.get('claude-b')?.pricePico.cacheWrite1h).toBe(7e6);
    expect(r.value.upstreams.get('default')?.api).toBe('openai');
  });

  it('prices audio tokens at their own rates when set, else at the text prices', () => {
    const doc = {
      ...base,
      models: [
        ...base.models,
        {
          id: 'gpt-4o-audio',
          upstream: 'default',
          price: {
            inputPerMTok: 2.5,
            outputPerMTok: 10,
            audioInputPerMTok: 40,
            audioOutputPerMTok: 80,
          },
        },
      ],
    };
    const r = parseConfig(doc);
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    const audio = r.value.models.get('gpt-4o-audio')!.pricePico;
    expect(audio).toMatchObject({
      input: 2.5e6,
      output: 10e6,
      audioInput: 40e6,
      audioOutput: 80e6,
    });
    expect(holdOutputPrice(audio, true)).toBe(80e6);
    expect(holdOutputPrice(audio, false)).toBe(10e6);
    expect(holdInputPrice(audio, true)).toBe(40e6);
    expect(holdInputPrice(audio)).toBe(2.5e6);
    const text = r.value.models.get('gpt-4o-mini')!.pricePico;
    expect(holdOutputPrice(text, true)).toBe(600_000);
    const tooDear = errorsOf({
      ...doc,
      models: [
        {
          ...doc.models[1]!,
          price: { inputPerMTok: 1, outputPerMTok: 1, audioOutputPerMTok: 1e9 },
        },
      ],
    });
    expect(tooDear.some((e) => e.includes('audioOutputPerMTok'))).toBe(true);
  });

  it('prices service tiers beside the base, each with the base price defaults', () => {
    const gpt5 = {
      id: 'gpt-5',
      upstream: 'default',
      price: {
        inputPerMTok: 1.25,
        outputPerMTok: 10,
        cachedInputPerMTok: 0.125,
        serviceTiers: {
          priority: { inputPerMTok: 2.5, outputPerMTok: 20, cachedInputPerMTok: 0.25 },
          flex: { inputPerMTok: 0.625, outputPerMTok: 5 },
        },
      },
    };
    const r = parseConfig({ ...base, models: [...base.models, gpt5] });
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    const model = r.value.models.get('gpt-5')!;
    expect(tierPrices(model, 'default')).toBe(model.pricePico);
    expect(tierPrices(model, 'priority')).toMatchObject({
      input: 2.5e6,
      output: 20e6,
      cachedInput: 250_000,
      audioOutput: 20e6,
    });
    // Cached input defaults to the tier's own input price.
    expect(tierPrices(model, 'flex')).toMatchObject({ input: 625_000, cachedInput: 625_000 });
    expect(tierPrices(model, 'scale')).toBeUndefined();
    expect(tierPrices(model, 'constructor')).toBeUndefined();
    // A model without tiers prices only the base; the other tiers are not priced.
    expect(tierPrices(r.value.models.get('gpt-4o-mini')!, 'priority')).toBeUndefined();

    const errs = (price: object) =>
      errorsOf({ ...base, models: [...base.models, { ...gpt5, price }] });
    const p = gpt5.price;
    expect(errs({ ...p, serviceTiers: { turbo: p.serviceTiers.flex } }).join()).toContain(
      'serviceTiers',
    );
    expect(errs({ ...p, autoServiceTier: 'scale' }).join()).toContain('autoServiceTier');
    expect(
      errs({ ...p, serviceTiers: { priority: { inputPerMTok: 1, outputPerMTok: 1e9 } } }).join(),
    ).toContain('outputPerMTok');
    const auto = parseConfig({
      ...base,
      models: [...base.models, { ...gpt5, price: { ...p, autoServiceTier: 'priority' } }],
    });
    expect(auto.ok).toBe(true);
  });

  it('refuses a fallback upstream that speaks another API', () => {
    const errors = errorsOf({
      ...base,
      upstreams: [
        ...base.upstreams,
        { id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' },
      ],
      models: [{ ...base.models[0], fallbackUpstreams: ['claude'] }],
    });
    expect(errors).toEqual([
      'models[id=gpt-4o-mini].fallbackUpstreams[0]: upstream "claude" speaks anthropic, the model\'s upstream openai',
    ]);
  });

  it('rejects unknown fields, bad YAML and hostile values without throwing', () => {
    expect(errorsOf({ ...base, surprise: 1 })[0]).toMatch(/^\(root\): /);
    expect(errorsOf('tenants: [ {id: ')[0]).toMatch(/^\(document\): not valid YAML/);
    expect(
      errorsOf({ tenants: [{ id: 'x', budgets: [{ window: 'day', limit: 1e300 }] }] })[0],
    ).toMatch(/^tenants\[id=x\]\.budgets\[day-tokens\]\.limit/);
    expect(errorsOf({ upstreams: [{ id: 'u', baseUrl: 'file:///etc/passwd' }] })[0]).toMatch(
      /^upstreams\[id=u\]\.baseUrl/,
    );
    expect(
      errorsOf({
        models: [{ id: 'gpt*', upstream: 'u', price: { inputPerMTok: 1, outputPerMTok: 1 } }],
      })[0],
    ).toMatch(/^models\[id=gpt\*\]\.id/);
    // A YAML alias bomb is refused rather than expanded.
    const bomb =
      'a: &a ["x","x","x","x","x","x","x","x","x"]\n' +
      Array.from(
        { length: 9 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9)
            .fill(`*${String.fromCharCode(97 + i)}`)
            .join(',')}]`,
      ).join('\n');
    expect(parseConfig(bomb).ok).toBe(false);
  });
});

describe('config errors a user can act on', () => {
  it('names list items by id (tenants[5] is tenants[id=support-bot]), by position only without one', () => {
    const tenants = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id }));
    const errors = errorsOf({
      tenants: [...tenants, { id: 'support-bot', budgets: [{ window: 'day', limit: -1 }] }, {}],
    });
    expect(errors).toEqual([
      'tenants[id=support-bot].budgets[day-tokens].limit: Too small: expected number to be >=0',
      'tenants[6].id: Invalid input: expected string, received undefined',
    ]);
  });

  it("answers a typo'd field with the one that was probably meant", () => {
    const errors = errorsOf({
      tenants: [{ id: 'support-bot', maxInflight: 4, budget: [] }],
      modles: [],
      webhooks: [
        {
          id: 'w',
          url: 'https://x.test',
          secretEnv: 'S',
          events: ['tenant.suspended'],
          retries: 1,
        },
      ],
    });
    expect(errors).toEqual([
      'tenants[id=support-bot]: unknown field "maxInflight" (did you mean "maxInFlight"?); unknown field "budget" (did you mean "budgets"?)',
      'webhooks[id=w]: unknown field "retries" (known: id, url, secretEnv, events)',
      '(root): unknown field "modles" (did you mean "models"?)',
    ]);
  });
});

describe('the example config of the stack', () => {
  it('validates', async () => {
    const { loadConfigFile } = await import('./load.js');
    const cfg = await loadConfigFile(
      new URL('../../../../infra/config/holdfast.example.yaml', import.meta.url).pathname,
    );
    expect([...cfg.tenants.keys()]).toEqual([
      'acme',
      'batch-summariser',
      'support-bot',
      'finance-ops',
    ]);
    expect(cfg.tenants.get('batch-summariser')?.budgets[0]).toMatchObject({
      id: 'month-tokens',
      limit: 40_000,
    });
  });
});

import { describe, expect, it } from 'vitest';
import { parseConfig } from './load.js';
import { longContextPrices } from './compile.js';

const upstreams = [
  { id: 'openai', baseUrl: 'http://127.0.0.1:8089/v1', apiKeyEnv: 'OPENAI_API_KEY' },
  { id: 'claude', api: 'anthropic', baseUrl: 'https://api.anthropic.com' },
];
const sonnet = {
  id: 'claude-sonnet',
  upstream: 'claude',
  price: {
    inputPerMTok: 3,
    outputPerMTok: 15,
    cachedInputPerMTok: 0.3,
    longContext: {
      aboveInputTokens: 200_000,
      inputPerMTok: 6,
      outputPerMTok: 22.5,
      cachedInputPerMTok: 0.6,
    },
  },
};
const gpt = {
  id: 'gpt-5.4',
  upstream: 'openai',
  price: {
    inputPerMTok: 2.5,
    outputPerMTok: 15,
    longContext: { aboveInputTokens: 272_000, inputPerMTok: 5, outputPerMTok: 22.5 },
    serviceTiers: {
      priority: {
        inputPerMTok: 5,
        outputPerMTok: 30,
        longContext: { aboveInputTokens: 272_000, inputPerMTok: 10, outputPerMTok: 45 },
      },
      flex: { inputPerMTok: 1.25, outputPerMTok: 7.5 },
    },
  },
};
const tenants = [
  {
    id: 'team',
    budgets: [{ window: 'day', limit: 1, unit: 'usd' }],
    useCases: [{ id: 'uc', maxTokens: 1_024, models: ['claude-sonnet', 'gpt-5.4'] }],
    keys: [],
  },
];

const parse = (models: object[]) =>
  parseConfig({
    upstreams,
    models,
    tenants: tenants.map((t) => ({
      ...t,
      useCases: [{ ...t.useCases[0]!, models: models.map((m) => (m as { id: string }).id) }],
    })),
  });
function errorsOf(models: object[]): string[] {
  const r = parse(models);
  if (r.ok) throw new Error('expected errors');
  return r.error.errors;
}

describe('price.longContext', () => {
  it('prices a tier above its line with the base price defaults (cache writes by the api)', () => {
    const r = parse([sonnet, gpt]);
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    const claude = r.value.models.get('claude-sonnet')!;
    expect(claude.longPricePico.default).toEqual({
      above: 200_000,
      prices: {
        input: 6e6,
        output: 22.5e6,
        cachedInput: 600_000,
        // Anthropic's rates over the long input price: 1.25x and 2x.
        cacheWrite5m: 7.5e6,
        cacheWrite1h: 12e6,
        audioInput: 6e6,
        audioOutput: 22.5e6,
      },
    });
    // At the line, short; above it, long.
    expect(longContextPrices(claude, 'default', 200_000)).toBeUndefined();
    expect(longContextPrices(claude, 'default', 200_001)).toBe(
      claude.longPricePico.default!.prices,
    );
    const openai = r.value.models.get('gpt-5.4')!;
    // Cache writes on an openai upstream default to the (long) input price.
    expect(longContextPrices(openai, 'default', 300_000)).toMatchObject({
      input: 5e6,
      cachedInput: 5e6,
      cacheWrite5m: 5e6,
    });
    expect(longContextPrices(openai, 'priority', 272_001)).toMatchObject({
      input: 10e6,
      output: 45e6,
    });
    // A tier without its own long-context price has none (not the base's).
    expect(longContextPrices(openai, 'flex', 1_000_000)).toBeUndefined();
    expect(longContextPrices(openai, 'scale', 1_000_000)).toBeUndefined();
    expect(longContextPrices(openai, 'constructor', 1_000_000)).toBeUndefined();
    // A model without longContext: nothing, whatever the count.
    const plain = parse([{ ...gpt, price: { inputPerMTok: 1, outputPerMTok: 2 } }]);
    if (!plain.ok) throw new Error(plain.error.errors.join('\n'));
    expect(plain.value.models.get('gpt-5.4')!.longPricePico).toEqual({});
  });

  it('refuses a long-context price below the short one, a bad line, unknown fields', () => {
    const long = sonnet.price.longContext;
    const withLong = (longContext: object) => ({
      ...sonnet,
      price: { ...sonnet.price, longContext },
    });
    const cheaper = errorsOf([withLong({ ...long, outputPerMTok: 10 })]);
    expect(cheaper.join()).toContain('longContext.outputPerMTok');
    // The short price sets a 1-hour write of 8; the long default is 2 x 6 = 12: fine. A short
    // write above the long default is refused, naming the field.
    const writes = errorsOf([
      { ...sonnet, price: { ...sonnet.price, cacheWrite1hPerMTok: 20, longContext: long } },
    ]);
    expect(writes.join()).toContain('longContext.cacheWrite1hPerMTok');
    expect(parse([withLong({ ...long, cacheWrite1hPerMTok: 20 })]).ok).toBe(true);
    // On a service tier too.
    const tier = errorsOf([
      {
        ...gpt,
        price: {
          ...gpt.price,
          serviceTiers: {
            priority: {
              ...gpt.price.serviceTiers.priority,
              longContext: { ...gpt.price.longContext },
            },
          },
        },
      },
    ]);
    expect(tier.join()).toContain('serviceTiers.priority.longContext.outputPerMTok');
    for (const above of [0, 1.5, -1, 1e12, '200000']) {
      expect(errorsOf([withLong({ ...long, aboveInputTokens: above })]).join()).toContain(
        'aboveInputTokens',
      );
    }
    expect(errorsOf([withLong({ inputPerMTok: 6, outputPerMTok: 22.5 })]).join()).toContain(
      'aboveInputTokens',
    );
    expect(errorsOf([withLong({ ...long, serviceTiers: {} })]).join()).toContain('serviceTiers');
  });
});

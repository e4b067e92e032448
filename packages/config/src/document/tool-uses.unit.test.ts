import { describe, expect, it } from 'vitest';
import { parseConfig } from './load.js';
import { toolFeeMicroUsd, toolUseKind, toolUsePrices, toolUsesText } from './tool-uses.js';

const doc = (toolUses: unknown) => ({
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    {
      id: 'gpt-5',
      upstream: 'default',
      price: { inputPerMTok: 1.25, outputPerMTok: 10, toolUses },
    },
  ],
  tenants: [{ id: 'team', useCases: [{ id: 'chat', maxTokens: 1_024, models: ['gpt-5'] }] }],
});

describe('price.toolUses', () => {
  it('compiles USD per 1,000 uses to micro-USD per 1,000 uses', () => {
    const r = parseConfig(doc({ web_search: 10, file_search: 2.5, code_interpreter: 30 }));
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    const prices = toolUsePrices(r.value.models.get('gpt-5')!);
    expect(prices).toEqual({
      web_search: 10_000_000,
      file_search: 2_500_000,
      code_interpreter: 30_000_000,
    });
    expect(toolUsesText(prices)).toBe(
      'web_search:10000000,file_search:2500000,code_interpreter:30000000',
    );
    // 3 searches and 1 file search: $0.03 + $0.0025; a third of a micro-dollar rounds up.
    expect(toolFeeMicroUsd(prices, { web_search: 3, file_search: 1 })).toBe(32_500);
    expect(toolFeeMicroUsd({ web_search: 1 }, { web_search: 1 })).toBe(1);
    expect(toolFeeMicroUsd(prices, {})).toBe(0);
    // Image generation, per image: the dearest image the operator allows ($0.25).
    const images = parseConfig(doc({ image_generation: 250 }));
    if (!images.ok) throw new Error(images.error.errors.join('\n'));
    const perImage = toolUsePrices(images.value.models.get('gpt-5')!);
    expect(perImage).toEqual({ image_generation: 250_000_000 });
    expect(toolFeeMicroUsd(perImage, { image_generation: 3 })).toBe(750_000);
  });

  it('refuses an unknown tool, a negative, non-numeric or too large price, naming the field', () => {
    for (const bad of [
      { computer_use: 1 },
      { web_search: -1 },
      { web_search: '10' },
      { web_search: 1e6 },
    ]) {
      const r = parseConfig(doc(bad));
      expect(r.ok, JSON.stringify(bad)).toBe(false);
      if (!r.ok) expect(r.error.errors.join()).toContain('toolUses');
    }
  });
});

describe('searchModel', () => {
  const search = (price: object, api?: string) => ({
    ...doc(undefined),
    upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1', ...(api ? { api } : {}) }],
    models: [{ id: 'gpt-5-search-api', upstream: 'default', searchModel: true, price }],
    tenants: [],
  });

  it('takes a search model that prices web_search, and defaults to none', () => {
    const r = parseConfig(
      search({ inputPerMTok: 1.25, outputPerMTok: 10, toolUses: { web_search: 10 } }),
    );
    if (!r.ok) throw new Error(r.error.errors.join('\n'));
    expect(r.value.models.get('gpt-5-search-api')!.searchModel).toBe(true);
    const plain = parseConfig(doc({ web_search: 10 }));
    expect(plain.ok && plain.value.models.get('gpt-5')!.searchModel).toBe(false);
  });

  it('refuses a search model without a web_search price, or on an anthropic upstream', () => {
    const unpriced = parseConfig(search({ inputPerMTok: 1.25, outputPerMTok: 10 }));
    expect(unpriced.ok).toBe(false);
    if (!unpriced.ok) expect(unpriced.error.errors.join()).toContain('price.toolUses.web_search');
    const anthropic = parseConfig(
      search({ inputPerMTok: 1, outputPerMTok: 5, toolUses: { web_search: 10 } }, 'anthropic'),
    );
    expect(anthropic.ok).toBe(false);
    if (!anthropic.ok) expect(anthropic.error.errors.join()).toContain('searchModel');
  });
});

describe('toolUseKind', () => {
  it("maps each API's tool types to their kind, dated versions included", () => {
    expect(toolUseKind('anthropic', 'web_search_20250305')).toBe('web_search');
    expect(toolUseKind('anthropic', 'web_fetch_20250910')).toBe('web_fetch');
    expect(toolUseKind('anthropic', 'code_execution_20250825')).toBeUndefined();
    expect(toolUseKind('anthropic', 'file_search')).toBeUndefined();
    expect(toolUseKind('openai', 'web_search')).toBe('web_search');
    expect(toolUseKind('openai', 'web_search_preview_2025_03_11')).toBe('web_search');
    expect(toolUseKind('openai', 'file_search')).toBe('file_search');
    expect(toolUseKind('openai', 'code_interpreter')).toBe('code_interpreter');
    expect(toolUseKind('openai', 'image_generation')).toBe('image_generation');
    expect(toolUseKind('anthropic', 'image_generation')).toBeUndefined();
    expect(toolUseKind('openai', 'mcp')).toBeUndefined();
    expect(toolUseKind('openai', 'web_fetch')).toBeUndefined();
  });
});

import { describe, expect, test } from 'vitest';
import { barGeometry, level, renderBars, sections } from './bars.js';
import { amount, esc, percent, usdDigits } from './html.js';
import type { BudgetsView, TenantView, WindowView } from './view.js';

const win = (over: Partial<WindowView> = {}): WindowView => ({
  tenant: 'team',
  budget: 'month-tokens',
  window: 'month',
  unit: 'tokens',
  limit: 40_000,
  used: 0,
  held: 0,
  enforce: true,
  soft: [0.8, 0.95],
  remaining: 40_000,
  ...over,
});

const tenant = (id: string, windows: WindowView[], over: Partial<TenantView> = {}): TenantView => ({
  tenant: id,
  parent: null,
  mode: 'reserve',
  suspended: false,
  suspendedBy: [],
  overruns: { count: 0, tokens: 0, microUsd: 0, lastAt: null },
  inFlight: 0,
  maxInFlight: null,
  billedTokens: 0,
  billedMicroUsd: 0,
  windows,
  keys: [],
  endUsers: [],
  endUserCount: 0,
  ...over,
});

const view = (tenants: TenantView[]): BudgetsView => ({
  object: 'budgets',
  time: '2026-11-30T12:00:00.000Z',
  scope: 'admin',
  tenants,
  capacity: [],
});

describe('bar geometry', () => {
  test('under the limit the track runs to 125% of it: the limit marker sits at 80%', () => {
    expect(barGeometry(win({ used: 20_000, held: 4_000 }))).toEqual({
      usedPct: 40,
      heldPct: 8,
      limitPct: 80,
      softPct: [64, 76],
    });
  });
  test('past 125% the track grows with usage, and the bar runs past the marker', () => {
    const g = barGeometry(win({ used: 60_000, held: 20_000 }));
    expect(g).toMatchObject({ usedPct: 75, heldPct: 25, limitPct: 50 });
    expect(g.usedPct).toBeGreaterThan(g.limitPct);
  });
  test('a zero limit and negative usage do not divide by zero or draw backwards', () => {
    expect(barGeometry(win({ limit: 0, soft: [] }))).toEqual({
      usedPct: 0,
      heldPct: 0,
      limitPct: 0,
      softPct: [],
    });
    expect(barGeometry(win({ used: -5 })).usedPct).toBe(0);
  });
});

test('level: ok, warn from the first soft threshold, over past the limit', () => {
  expect(level(win({ used: 31_999 }))).toBe('ok');
  expect(level(win({ used: 32_000 }))).toBe('warn');
  expect(level(win({ used: 40_000 }))).toBe('warn');
  expect(level(win({ used: 40_001 }))).toBe('over');
  expect(level(win({ used: 1, limit: 0 }))).toBe('over');
});

test('amounts: tokens with separators, dollars to the precision their limit needs', () => {
  expect(amount(38_176, 'tokens')).toBe('38,176');
  expect(amount(12_345_678, 'usd')).toBe('$12.35');
  expect(amount(-2_500_000, 'usd')).toBe('-$2.50');
  expect(usdDigits(250_000_000)).toBe(2);
  expect(usdDigits(50_000)).toBe(4);
  expect(amount(29_800, 'usd', usdDigits(50_000))).toBe('$0.0298');
  expect(percent(0.9545)).toBe('95.5%');
  expect(percent(Infinity)).toBe('∞%');
  expect(esc(`<b a="x">'&'</b>`)).toBe('&lt;b a=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;');
});

test('sections: one per budget owner; an org shown once though each team repeats it', () => {
  const org = win({ tenant: 'acme', budget: 'month-usd', unit: 'usd', limit: 5_000_000 });
  const v = view([
    tenant('batch', [win({ tenant: 'batch' }), org], { parent: 'acme' }),
    tenant('support', [win({ tenant: 'support' }), org], { parent: 'acme' }),
    tenant('acme', [org]),
  ]);
  expect(sections(v).map((s) => [s.tenant, s.windows.map((w) => w.budget)])).toEqual([
    ['batch', ['month-tokens']],
    ['acme', ['month-usd']],
    ['support', ['month-tokens']],
  ]);
  const html = renderBars(v);
  expect(html.match(/data-tenant="acme" data-budget="month-usd"/g)).toHaveLength(1);
  expect(html).toContain('org of 2');
});

test('a tenant view shows the org above it without the org details', () => {
  const html = renderBars(
    view([
      tenant(
        'batch',
        [win({ tenant: 'batch', used: 50_000 }), win({ tenant: 'acme', budget: 'day-tokens' })],
        { parent: 'acme', suspended: true, inFlight: 2, maxInFlight: 32 },
      ),
    ]),
  );
  expect(html).toContain('above your team');
  expect(html).toContain('2/32 in flight');
  expect(html).toContain('data-suspended="true"');
  expect(html).toContain('over by 10,000');
  expect(html).toContain('data-level="over"');
});

test('text from the ledger is escaped', () => {
  const html = renderBars(view([tenant('<script>', [])]));
  expect(html).not.toContain('<script>');
  expect(html).toContain('&lt;script&gt;');
  expect(renderBars(view([]))).toContain('No tenants');
});

test("an upstream's counting limit shows beside its capacity, or alone when it is all it declares", () => {
  const row = {
    model: null,
    tokens: 4_000,
    requests: 12,
    blockedUntil: null,
    countsPerMinute: null,
    counts: 0,
  };
  const html = renderBars({
    ...view([tenant('batch', [win({ tenant: 'batch' })])]),
    capacity: [
      { ...row, upstream: 'openai', tokensPerMinute: 20_000, requestsPerMinute: null },
      {
        ...row,
        upstream: 'claude',
        tokensPerMinute: 20_000,
        requestsPerMinute: null,
        countsPerMinute: 100,
        counts: 7,
      },
      {
        ...row,
        upstream: 'counts-only',
        tokensPerMinute: null,
        requestsPerMinute: null,
        countsPerMinute: 10,
        counts: 5,
      },
    ],
  });
  expect(html).toContain('4,000 of 20,000 tokens in the last minute · 12 requests</div>');
  expect(html).toContain(
    '4,000 of 20,000 tokens in the last minute · 12 requests · 7 of 100 counts',
  );
  expect(html).toContain('data-upstream="counts-only" data-used="5" data-limit="10"');
  expect(html).toContain('5 of 10 counts in the last minute</div>');
});

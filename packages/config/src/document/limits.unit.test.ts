import { describe, expect, it } from 'vitest';
import { CONFIG_LIMITS } from './limits.js';
import { parseConfig } from './load.js';

const upstreams = [{ id: 'u', baseUrl: 'http://127.0.0.1:8089/v1' }];
const models = [{ id: 'm', upstream: 'u', price: { inputPerMTok: 1, outputPerMTok: 2 } }];
const key = (i: number) => ({ id: `k-${i}`, sha256: i.toString(16).padStart(64, '0') });
const tenantWithKeys = (n: number) => ({
  upstreams,
  models,
  tenants: [{ id: 'team', keys: Array.from({ length: n }, (_, i) => key(i)) }],
});
/** Every budget a list may hold: one per window and unit. */
const sixBudgets = (['minute', 'day', 'month'] as const).flatMap((window) =>
  (['tokens', 'usd'] as const).map((unit) => ({ window, unit, limit: 1_000 })),
);

function errorsOf(doc: unknown): string[] {
  const r = parseConfig(doc);
  if (r.ok) throw new Error('expected errors');
  return r.error.errors;
}
const accepted = (doc: unknown) => {
  const r = parseConfig(doc);
  if (!r.ok) throw new Error(r.error.errors.join('\n'));
  return r.value;
};

describe('config limits: a list past its documented maximum is refused, naming it', () => {
  it('keys per tenant: 1,000 accepted, 1,001 refused', () => {
    expect(accepted(tenantWithKeys(CONFIG_LIMITS.keysPerTenant)).keysByHash.size).toBe(1_000);
    expect(errorsOf(tenantWithKeys(CONFIG_LIMITS.keysPerTenant + 1))).toEqual([
      'tenants[id=team].keys: at most 1,000 keys per tenant (docs/configuration.md#limits)',
    ]);
  });

  it('budgets: the six of every window and unit accepted in each list, a seventh refused as too many', () => {
    const doc = (budgets: unknown[]) => ({
      tenants: [{ id: 'team', budgets, endUserBudgets: budgets, keys: [{ ...key(1), budgets }] }],
    });
    expect(accepted(doc(sixBudgets)).tenants.get('team')!.budgets).toHaveLength(6);
    const errors = errorsOf(doc([...sixBudgets, sixBudgets[0]]));
    const tooMany = 'at most 6 budgets, one per window and unit (docs/configuration.md#limits)';
    // Each list names the limit (and the seventh, a second minute-tokens, is a duplicate too).
    expect(errors.filter((e) => e.includes(tooMany))).toEqual([
      `tenants[id=team].budgets: ${tooMany}`,
      `tenants[id=team].endUserBudgets: ${tooMany}`,
      `tenants[id=team].keys[id=k-1].budgets: ${tooMany}`,
    ]);
  });

  it('tenants: 1,000 accepted, 1,001 refused', () => {
    const tenants = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `t-${i}` }));
    expect(accepted({ tenants: tenants(1_000) }).tenants.size).toBe(1_000);
    expect(errorsOf({ tenants: tenants(1_001) })).toEqual([
      'tenants: at most 1,000 tenants (docs/configuration.md#limits)',
    ]);
  });

  it('use cases, models, upstreams, webhooks and their lists each have a maximum', () => {
    const many = <T>(n: number, f: (i: number) => T) => Array.from({ length: n }, (_, i) => f(i));
    const cases = errorsOf({
      upstreams: many(101, (i) => ({ id: `u-${i}`, baseUrl: 'http://127.0.0.1:1/v1' })),
      models: many(501, (i) => ({ ...models[0], id: `m-${i}`, upstream: 'u-0' })),
      tenants: [
        {
          id: 'team',
          useCases: many(201, (i) => ({ id: `uc-${i}`, maxTokens: 1, models: ['m-0'] })),
        },
      ],
      webhooks: many(101, (i) => ({
        id: `w-${i}`,
        url: 'https://example.test/hook',
        secretEnv: 'HOOK_SECRET',
        events: ['threshold.crossed'],
      })),
    });
    expect(cases).toEqual([
      'upstreams: at most 100 upstreams (docs/configuration.md#limits)',
      'models: at most 500 models (docs/configuration.md#limits)',
      'tenants[id=team].useCases: at most 200 use cases per tenant (docs/configuration.md#limits)',
      'webhooks: at most 100 webhooks (docs/configuration.md#limits)',
    ]);
    const events = errorsOf({
      webhooks: [
        {
          id: 'w',
          url: 'https://example.test/hook',
          secretEnv: 'HOOK_SECRET',
          events: many(15, () => 'threshold.crossed'),
        },
      ],
    });
    expect(events).toEqual([
      'webhooks[id=w].events: at most 14 event types (each once) (docs/configuration.md#limits)',
    ]);
  });

  it('the whole document: over 768 KiB as JSON it is refused, saying by how much', () => {
    // 900 tenants of 1,000 keys each would be far over; a few hundred long-id keys suffice.
    const tenants = Array.from({ length: 8 }, (_, t) => ({
      id: `t-${t}`,
      keys: Array.from({ length: 1_000 }, (_, i) => ({
        id: `key-${t}-${i}`.padEnd(64, 'x'),
        sha256: (t * 1_000 + i).toString(16).padStart(64, '0'),
      })),
    }));
    const [error, ...rest] = errorsOf({ tenants });
    expect(rest).toEqual([]);
    expect(error).toMatch(
      /^\(root\): the document is [\d,]+ bytes as JSON \(defaults filled in\), over the limit of 786,432/,
    );
    expect(accepted({ tenants: tenants.slice(0, 2) }).tenants.size).toBe(2);
  });
});

describe('config limits: a stored document is not held to them', () => {
  it('parseConfig(doc, source, { limits: false }) loads a document over them (stored before they existed)', () => {
    const doc = tenantWithKeys(CONFIG_LIMITS.keysPerTenant + 1);
    expect(parseConfig(doc).ok).toBe(false);
    const stored = parseConfig(doc, 'stored config', { limits: false });
    expect(stored.ok && stored.value.keysByHash.size).toBe(1_001);
  });
});

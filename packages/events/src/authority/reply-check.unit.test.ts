import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { ODD_VALUES as SHARED_ODD_VALUES } from '../odd-values.js';
import { AdmitReply, ExtendReply, RenewReply } from './admit.js';
import { CALL_PATH_REPLIES } from './fast-check.js';
import { BatchReply } from './operations.js';
import { CloseReply } from './settle.js';

/**
 * The edge parses the authority's call-path replies fast (ajv compiled from zod's JSON Schema)
 * and asks zod only about what that does not pass. This holds the two equal: on the replies the
 * authority sends and on thousands of mutations of them (every field at every depth deleted or
 * set to an odd value, an unknown key added to every object, every object's keys reversed),
 * what the fast parse passes must be zod's output to the byte, and what zod refuses it must
 * not pass.
 */

const window = (over: Record<string, unknown> = {}) => ({
  tenant: 'team-a',
  budget: 'month-tokens',
  window: 'month',
  unit: 'tokens',
  limit: 1_000_000,
  used: 4_210,
  held: 2_048,
  enforce: true,
  ...over,
});

const admitted = {
  admitted: true,
  reservationId: randomUUID(),
  org: 'acme',
  upstream: 'openai',
  mode: 'reserve',
  heldTokens: 2_418,
  heldMicroUsd: 1_450,
  maxTokens: 2_048,
  shrunk: false,
  expiresAt: '2026-12-05T23:10:00.000Z',
  duplicate: false,
  coveredOutputTokens: 2_048,
  windows: [
    window(),
    window({ scope: 'key', subject: 'batch-1', budget: 'day-tokens', window: 'day' }),
  ],
};

const refused = {
  admitted: false,
  code: 'budget_exceeded',
  message: 'month-tokens: 2,418 tokens needed, 12 left of 1,000,000',
  retryAfterSeconds: 3_600,
  budget: 'month-tokens',
  level: 'acme',
  neededTokens: 2_418,
  neededMicroUsd: 0,
  windows: [window({ used: 999_988 })],
  summary: { kind: 'budget_exceeded\u0001team-a', fields: 'a\u0000b' },
};

const closed = {
  status: 'settled',
  billedTokens: 386,
  costMicroUsd: 231,
  windows: [window()],
  overrunTokens: 0,
  overrunMicroUsd: 0,
};

const EXAMPLES: [z.ZodType, unknown][] = [
  [AdmitReply, admitted],
  [AdmitReply, { ...admitted, org: undefined, upstream: undefined, windows: [] }],
  [AdmitReply, refused],
  [AdmitReply, { ...refused, summary: undefined, budget: null, level: null }],
  [CloseReply, closed],
  [CloseReply, { status: 'already_settled', billedTokens: 0, costMicroUsd: 0, windows: [] }],
  [CloseReply, { ...closed, overrunTokens: 120, overrunMicroUsd: 33 }],
  [
    ExtendReply,
    {
      status: 'extended',
      heldTokens: 4_000,
      heldMicroUsd: 9,
      coveredOutputTokens: 3_000,
      windows: [window()],
    },
  ],
  [RenewReply, { status: 'renewed', expiresAt: '2026-12-05T23:10:00.000Z' }],
  [RenewReply, { status: 'closed', expiresAt: null }],
  [
    BatchReply,
    {
      items: [
        { i: 0, ok: true, value: admitted },
        { i: 1, ok: false, code: 'budget_store_unavailable', message: 'Redis is failing over' },
        { i: 2, ok: true, value: closed },
      ],
    },
  ],
];

/** The shared odd values, and those of these replies' enums and ranges. */
const ODD_VALUES: unknown[] = [
  ...SHARED_ODD_VALUES,
  undefined,
  false,
  1,
  'reserve',
  'settled',
  'budget_exceeded',
  'key',
  'x'.repeat(200),
  'x'.repeat(201),
  window(),
  [window()],
  [window({ unknown: 1 })],
  { kind: 'k', fields: 'f' },
];

/** JSON's own: undefined keys gone, as the authority's replies arrive. */
const json = (v: unknown): unknown => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

/** Every path to a value inside `v` (objects' keys and arrays' indexes), the top excluded. */
function paths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (typeof v !== 'object' || v === null) return [];
  const keys = Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v);
  return keys.flatMap((k) => [[...at, k], ...paths((v as Record<string, unknown>)[k], [...at, k])]);
}

/** Every object's path, the top included. */
function objectPaths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (typeof v !== 'object' || v === null) return [];
  const inner = (Array.isArray(v) ? v.map((_, i) => i) : Object.keys(v)).flatMap((k) =>
    objectPaths((v as Record<string, unknown>)[k], [...at, k]),
  );
  return Array.isArray(v) ? inner : [at, ...inner];
}

/** A copy of `v` with `f` applied to the value at `path` (undefined: the key deleted). */
function change(v: unknown, path: (string | number)[], f: (old: unknown) => unknown): unknown {
  if (path.length === 0) return f(v);
  const [head, ...rest] = path as [string | number, ...(string | number)[]];
  if (Array.isArray(v))
    return (v as unknown[]).map((x, i) => (i === head ? change(x, rest, f) : x));
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(o)) {
    if (k !== head) out[k] = o[k];
    else if (rest.length > 0 || f(o[k]) !== undefined) out[k] = change(o[k], rest, f);
  }
  return out;
}

const reversed = (o: unknown) => Object.fromEntries(Object.entries(o as object).reverse());

let passed = 0;

function same(schema: z.ZodType, input: unknown): void {
  const zod = schema.safeParse(structuredClone(input));
  const fast = CALL_PATH_REPLIES.get(schema)!(structuredClone(input));
  const what = JSON.stringify(input)?.slice(0, 300);
  if (!zod.success) {
    expect(fast, what).toBeUndefined();
    return;
  }
  if (fast === undefined) return;
  passed++;
  expect(JSON.stringify(fast), what).toBe(JSON.stringify(zod.data));
  expect(fast, what).toEqual(zod.data);
}

describe("the call path's replies parsed fast (ajv) as zod parses them", () => {
  it('passes every reply the authority sends, defaults filled, keys in zod order', () => {
    for (const [schema, example] of EXAMPLES) {
      const input = json(example);
      const fast = CALL_PATH_REPLIES.get(schema)!(structuredClone(input));
      expect(fast, JSON.stringify(input)).toBeDefined();
      same(schema, input);
      for (const at of objectPaths(input)) same(schema, change(input, at, reversed));
    }
    // The defaults zod fills, filled here too.
    const { overrunTokens: _, overrunMicroUsd: __, ...old } = closed;
    expect(CALL_PATH_REPLIES.get(CloseReply)!(json(old))).toEqual(closed);
    expect(new Set(EXAMPLES.map(([s]) => s))).toEqual(new Set(CALL_PATH_REPLIES.keys()));
  });

  it('on every field at every depth deleted, set to an odd value, or joined by an unknown key', () => {
    let cases = 0;
    passed = 0;
    for (const [schema, example] of EXAMPLES) {
      const input = json(example);
      for (const at of paths(input)) {
        for (const v of ODD_VALUES) {
          same(schema, json(change(input, at, () => v)));
          cases++;
        }
      }
      for (const at of objectPaths(input)) {
        same(
          schema,
          change(input, at, (o) => ({ ...(o as object), unknown: 1 })),
        );
        same(
          schema,
          change(input, at, (o) => reversed({ ...(o as object), constructor: 'x' })),
        );
        cases += 2;
      }
    }
    expect(cases).toBeGreaterThan(5_000);
    // Most mutations are refused by both; enough pass to hold the outputs equal.
    expect(passed).toBeGreaterThan(300);
  });

  it('a key zod would drop is left to zod, which drops it (nothing dropped on the fast path)', () => {
    const extra = { ...closed, newField: 1, windows: [{ ...window(), newer: true }] };
    expect(CALL_PATH_REPLIES.get(CloseReply)!(json(extra))).toBeUndefined();
    expect(CloseReply.parse(json(extra))).toEqual(closed);
  });
});

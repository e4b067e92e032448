import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { AdmitRequest, ExtendRequest, RenewRequest } from './admit.js';
import { ODD_VALUES as SHARED_ODD_VALUES } from '../odd-values.js';
import { CALL_PATH_CHECKS } from './fast-check.js';
import { ReleaseRequest, SettleRequest, Usage, USAGE_RULES } from './settle.js';

/**
 * The authority checks the call path's requests with ajv (compiled from zod's JSON Schema) and
 * asks zod only about what ajv refuses. This holds the two equal: on a valid request of every
 * operation and on thousands of mutations of them, the fast verdict and output must be zod's.
 */

const usage = {
  promptTokens: 480,
  completionTokens: 2_048,
  cachedPromptTokens: 120,
  cacheWrite5mTokens: 60,
  cacheWrite1hTokens: 30,
  reasoningTokens: 400,
  audioPromptTokens: 12,
  audioCompletionTokens: 24,
  serviceTier: 'flex',
  toolUses: { web_search: 2 },
};

const EXAMPLES: [z.ZodType, keyof typeof CALL_PATH_CHECKS, Record<string, unknown>][] = [
  [
    AdmitRequest,
    'admit',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      keyId: 'batch-1',
      endUser: 'user-7',
      useCase: 'UC-112',
      model: 'gpt-4o-mini',
      api: 'messages',
      promptTokens: 370,
      maxTokens: 1_024,
      leaseMs: 60_000,
      minOutputTokens: 16,
      extensible: true,
      audioInput: false,
      audioOutput: true,
      serviceTier: 'priority',
      toolUses: { web_search: 3 },
    },
  ],
  [
    AdmitRequest,
    'admit',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      keyId: null,
      useCase: 'chat',
      model: 'gpt-4o-mini',
      promptTokens: 0,
      maxTokens: 1,
    },
  ],
  [
    AdmitRequest,
    'admit',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      keyId: 'batch-1',
      useCase: 'UC-999',
      model: 'claude-sonnet-5-5',
      api: 'messages',
      promptTokens: 0,
      maxTokens: 4_096,
      uncounted: true,
    },
  ],
  [
    ExtendRequest,
    'extend',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      org: 'acme',
      keyId: 'batch-1',
      endUser: 'user-7',
      outputTokens: 512,
    },
  ],
  [RenewRequest, 'renew', { reservationId: randomUUID(), tenant: 'team-a', org: 'acme' }],
  [
    SettleRequest,
    'settle',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      org: 'acme',
      upstream: 'openai',
      model: 'gpt-4o-mini',
      keyId: 'batch-1',
      endUser: 'user-7',
      usage,
      outcome: 'client_disconnected',
    },
  ],
  [
    SettleRequest,
    'settle',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      usage: { promptTokens: 25, completionTokens: 16 },
    },
  ],
  [
    ReleaseRequest,
    'release',
    {
      reservationId: randomUUID(),
      tenant: 'team-a',
      org: 'acme',
      upstream: 'openai',
      model: 'gpt-4o-mini',
      keyId: null,
      endUser: 'user-7',
      reason: 'not_forwarded',
    },
  ],
];

/** The shared odd values, and those of these requests' enums and ranges. */
const ODD_VALUES: unknown[] = [
  ...SHARED_ODD_VALUES,
  false,
  1,
  999,
  1_000,
  'chat',
  'responses',
  'default',
  'flex',
  'x'.repeat(200),
  'x'.repeat(257),
  { web_search: 1 },
  { web_search: 0 },
  { web_search: 1, nope: 1 },
  { nope: 1 },
  { ...usage },
];

function verdicts(schema: z.ZodType, op: keyof typeof CALL_PATH_CHECKS, input: unknown): boolean {
  const zod = schema.safeParse(structuredClone(input));
  const body = structuredClone(input);
  const fast = CALL_PATH_CHECKS[op](body);
  const what = JSON.stringify(input).slice(0, 300);
  expect(fast, what).toBe(zod.success);
  if (fast && zod.success) expect(body, what).toEqual(zod.data);
  return fast;
}

describe('the call path requests fast check (ajv) judges as zod', () => {
  it('on a valid request of every operation, unknown keys refused as zod refuses them', () => {
    for (const [schema, op, example] of EXAMPLES) {
      expect(verdicts(schema, op, example)).toBe(true);
      expect(verdicts(schema, op, { ...example, unknown: 1 })).toBe(false);
    }
    expect(new Set(EXAMPLES.map(([, op]) => op))).toEqual(new Set(Object.keys(CALL_PATH_CHECKS)));
  });

  it('on every field deleted or set to an odd value, usage and tool uses included', () => {
    let cases = 0;
    for (const [schema, op, example] of EXAMPLES) {
      for (const key of Object.keys(example)) {
        const { [key]: _, ...without } = example;
        verdicts(schema, op, without);
        cases++;
        for (const v of ODD_VALUES) {
          verdicts(schema, op, { ...example, [key]: v });
          cases++;
        }
      }
      const u = example.usage as Record<string, unknown> | undefined;
      if (!u) continue;
      for (const key of Object.keys(usage)) {
        const { [key]: _, ...without } = u;
        verdicts(schema, op, { ...example, usage: without });
        for (const v of [undefined, ...ODD_VALUES]) {
          verdicts(schema, op, { ...example, usage: { ...u, [key]: v } });
          verdicts(schema, op, { ...example, usage: { ...usage, [key]: v } });
          cases += 2;
        }
      }
    }
    expect(cases).toBeGreaterThan(3_000);
  });

  it("checks every one of Usage's refinements (a new .refine must be a rule, or this fails)", () => {
    const checks = (Usage as unknown as { _zod: { def: { checks?: unknown[] } } })._zod.def.checks;
    expect(checks?.length).toBe(USAGE_RULES.length);
    // Each rule broken alone: zod refuses it, and so does the fast check.
    const broken = [
      { cachedPromptTokens: 481, cacheWrite5mTokens: 0, cacheWrite1hTokens: 0 },
      { reasoningTokens: 2_049 },
      { audioPromptTokens: 481 },
      { audioCompletionTokens: 2_049 },
    ];
    const [schema, op, example] = EXAMPLES[5]!;
    for (const b of broken) {
      expect(verdicts(schema, op, { ...example, usage: { ...usage, ...b } })).toBe(false);
    }
  });
});

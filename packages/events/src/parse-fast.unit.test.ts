import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from './envelope.js';
import { HoldfastEvent, parseEvent } from './events.js';
import { SYSTEM_TENANT } from './ids.js';
import { ODD_VALUES as SHARED_ODD_VALUES } from './odd-values.js';

/**
 * parseEvent checks with ajv (compiled from zod's JSON Schema) and asks zod only about what
 * ajv refuses. This holds the two equal: on one valid event of every type and on thousands
 * of mutations of them, ajv's verdict and output must be zod's.
 */

const at = '2026-11-30T12:00:00.000Z';
const window = {
  tenant: 'team-a',
  budget: 'month-tokens',
  window: 'month',
  unit: 'tokens',
  limit: 40_000,
  used: 1_394,
  held: 0,
  enforce: true,
};
const envelope = (type: string) => ({
  id: randomUUID(),
  schemaVersion: 1,
  time: at,
  tenant: 'team-a',
  org: 'acme',
  type,
});
const call = {
  reservationId: randomUUID(),
  keyId: 'batch-1',
  useCase: 'UC-112',
  model: 'gpt-4o-mini',
  mode: 'reserve',
  heldTokens: 1_394,
  heldMicroUsd: 670,
};
const budget = { level: 'team-a', budget: 'month-tokens', window: 'month', unit: 'tokens' };

const EXAMPLES: Record<(typeof EVENT_TYPES)[number], Record<string, unknown>> = {
  'reservation.created': {
    ...envelope('reservation.created'),
    ...call,
    promptTokens: 370,
    maxTokens: 1_024,
    requestedMaxTokens: 4_096,
    chargedTokens: 1_394,
    chargedMicroUsd: 670,
    expiresAt: at,
    windows: [window],
  },
  'reservation.extended': {
    ...envelope('reservation.extended'),
    ...call,
    addedTokens: 512,
    addedMicroUsd: 300,
    coveredOutputTokens: 1_536,
    windows: [window],
  },
  'reservation.settled': {
    ...envelope('reservation.settled'),
    ...call,
    api: 'messages',
    promptTokens: 370,
    completionTokens: 1_024,
    cachedPromptTokens: 100,
    cacheWrite5mTokens: 50,
    cacheWrite1hTokens: 20,
    reasoningTokens: 300,
    billedTokens: 1_394,
    costMicroUsd: 670,
    chargedTokens: -12,
    chargedMicroUsd: 0,
    outcome: 'completed',
    durationMs: 1_200,
    windows: [window, { ...window, budget: 'day-usd', window: 'day', unit: 'usd', charged: 1_500 }],
  },
  'reservation.released': {
    ...envelope('reservation.released'),
    ...call,
    chargedTokens: -1_394,
    chargedMicroUsd: -670,
    reason: 'upstream_error',
    durationMs: 30,
    windows: [],
  },
  'reservation.expired': {
    ...envelope('reservation.expired'),
    ...call,
    keyId: null,
    chargedTokens: -1_394,
    chargedMicroUsd: -670,
    leaseMs: 1_800_000,
    windows: [window],
  },
  'reservation.moved': {
    ...envelope('reservation.moved'),
    reservationId: call.reservationId,
    model: 'gpt-4o-mini',
    upstream: 'backup',
    fromUpstream: 'openai',
    tokens: 1_394,
    fromUsedTokens: 120,
  },
  'reservation.overrun': {
    ...envelope('reservation.overrun'),
    ...call,
    billedTokens: 1_500,
    costMicroUsd: 700,
    overrunTokens: 106,
    overrunMicroUsd: 30,
    windows: [window],
  },
  'admission.refused': {
    ...envelope('admission.refused'),
    reservationId: randomUUID(),
    keyId: null,
    useCase: 'UC-112',
    model: 'gpt-4o-mini',
    mode: 'reserve',
    code: 'budget_exceeded',
    message: 'month-tokens: 39,000 used + 1,394 needed > 40,000',
    promptTokens: 370,
    maxTokens: 1_024,
    neededTokens: 1_394,
    neededMicroUsd: 670,
    budget: 'month-tokens',
    level: null,
    retryAfterSeconds: 12,
    shadow: false,
    windows: [window],
  },
  'threshold.crossed': {
    ...envelope('threshold.crossed'),
    ...budget,
    threshold: 0.8,
    utilisation: 0.81,
    limit: 40_000,
    used: 32_400,
    held: 0,
    causeEventId: randomUUID(),
    windows: [window],
  },
  'tenant.suspended': {
    ...envelope('tenant.suspended'),
    reason: 'month-tokens crossed 100%',
    budget: null,
    graceMs: 0,
    by: 'alerter',
    windows: [window],
  },
  'tenant.resumed': { ...envelope('tenant.resumed'), by: 'window_freed', windows: [] },
  'budget.exhaustion_projected': {
    ...envelope('budget.exhaustion_projected'),
    ...budget,
    burnPerSecond: 12.5,
    projectedExhaustionAt: at,
    horizonSeconds: 3_600,
    limit: 40_000,
    used: 30_000,
    held: 1_394,
    windows: [window],
  },
  'config.changed': {
    ...envelope('config.changed'),
    tenant: SYSTEM_TENANT,
    org: SYSTEM_TENANT,
    version: 3,
    hash: 'a'.repeat(64),
    tenants: 2,
    source: 'file',
  },
};

/** The shared odd values and windows. */
const ODD_VALUES: unknown[] = [...SHARED_ODD_VALUES, [window], { ...window }];

function verdicts(input: unknown): void {
  const zod = HoldfastEvent.safeParse(structuredClone(input));
  const fast = parseEvent(JSON.stringify(input));
  expect(fast.ok, JSON.stringify(input).slice(0, 300)).toBe(zod.success);
  if (fast.ok && zod.success) expect(fast.value).toEqual(zod.data);
}

describe('parseEvent fast path (ajv) judges as zod', () => {
  it('on one valid event of every type, unknown keys removed as zod removes them', () => {
    for (const example of Object.values(EXAMPLES)) {
      expect(HoldfastEvent.safeParse(example).success).toBe(true);
      verdicts(example);
      verdicts({
        ...example,
        unknown: { deep: 1 },
        windows: example.windows && [{ ...window, x: 1 }],
      });
    }
    expect(Object.keys(EXAMPLES).sort()).toEqual([...EVENT_TYPES].sort());
  });

  it('on every field of every type deleted or set to an odd value, windows included', () => {
    let cases = 0;
    for (const example of Object.values(EXAMPLES)) {
      for (const key of Object.keys(example)) {
        const { [key]: _, ...without } = example;
        verdicts(without);
        cases++;
        for (const v of ODD_VALUES) {
          verdicts({ ...example, [key]: v });
          cases++;
        }
      }
      if (!Array.isArray(example.windows) || example.windows.length === 0) continue;
      for (const key of Object.keys(window)) {
        for (const v of [undefined, ...ODD_VALUES]) {
          verdicts({ ...example, windows: [{ ...window, [key]: v }] });
          cases++;
        }
      }
    }
    expect(cases).toBeGreaterThan(5_000);
  });
});

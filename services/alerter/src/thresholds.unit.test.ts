import { CURRENT_SCHEMA_VERSION, type HoldfastEvent } from '@holdfast/events';
import { describe, expect, test } from 'vitest';
import type { WindowPolicy } from './holdfast-config.js';
import {
  chargedBy,
  crossed,
  crossingId,
  HARD_LEVEL,
  isAfter,
  levels,
  standing,
} from './thresholds.js';

const soft: Pick<WindowPolicy, 'soft' | 'hard'> = { soft: [0.8, 0.95], hard: false };
const hard: Pick<WindowPolicy, 'soft' | 'hard'> = { ...soft, hard: true };
const at = (used: number, limit = 1_000) => ({ used, limit });

describe('crossings are a property of one event (before and after its change)', () => {
  test('nothing fires below the first threshold', () => {
    expect(crossed(0, at(799), levels(soft))).toEqual([]);
  });

  test('an event that reaches a threshold crosses it; one that stays above does not', () => {
    expect(crossed(799, at(800), levels(soft))).toEqual([0.8]);
    expect(crossed(800, at(900), levels(soft))).toEqual([]);
  });

  test('a jump past several thresholds crosses each of them, ascending', () => {
    expect(crossed(700, at(990), levels(soft))).toEqual([0.8, 0.95]);
  });

  test('a dip before the event (usage aged out) makes the event a crossing again', () => {
    // The window was at 90% after the previous event, 70% just before this one.
    expect(crossed(700, at(850), levels(soft))).toEqual([0.8]);
    // Downward or flat changes cross nothing.
    expect(crossed(900, at(700), levels(soft))).toEqual([]);
    expect(crossed(850, at(850), levels(soft))).toEqual([]);
  });

  test('the hard level exists only for enforced budgets and is crossed at 100%', () => {
    expect(levels(soft)).toEqual([0.8, 0.95]);
    expect(levels(hard)).toEqual([0.8, 0.95, HARD_LEVEL]);
    expect(crossed(990, at(999), levels(hard))).toEqual([]);
    expect(crossed(990, at(1_000), levels(hard))).toEqual([HARD_LEVEL]);
  });

  test('standing: a level not known yet fires when the window is at or above it before and after', () => {
    expect(standing(850, at(860), [0.8, 0.95])).toEqual([0.8]);
    // Crossed by the event itself: a crossing, not standing. Taken below: nothing.
    expect(standing(790, at(860), [0.8])).toEqual([]);
    expect(standing(850, at(700), [0.8])).toEqual([]);
  });
});

describe('what an event charged', () => {
  const base = {
    id: '00000000-0000-4000-8000-000000000000',
    schemaVersion: CURRENT_SCHEMA_VERSION,
    time: '2026-12-01T10:00:00.000Z',
    tenant: 't',
    org: 't',
  };
  test('charged amounts by unit; events that bill nothing charge 0', () => {
    const settled = {
      ...base,
      type: 'reservation.settled',
      chargedTokens: 120,
      chargedMicroUsd: -30,
    } as unknown as HoldfastEvent;
    expect(chargedBy(settled, { unit: 'tokens' })).toBe(120);
    expect(chargedBy(settled, { unit: 'usd' })).toBe(-30);
    const refused = { ...base, type: 'admission.refused' } as unknown as HoldfastEvent;
    expect(chargedBy(refused, { unit: 'tokens' })).toBe(0);
  });

  test('a window the event charged otherwise (a budget added mid-call) says so: that is its charge', () => {
    const settled = {
      ...base,
      type: 'reservation.settled',
      chargedTokens: 50,
      chargedMicroUsd: -30,
    } as unknown as HoldfastEvent;
    expect(chargedBy(settled, { unit: 'tokens', charged: 150 })).toBe(150);
    expect(chargedBy(settled, { unit: 'usd', charged: 0 })).toBe(0);
    expect(chargedBy(settled, { unit: 'tokens' })).toBe(50);
  });
});

describe('crossing ids', () => {
  test('fixed by cause, window and level; a lowercase UUID', () => {
    const a = crossingId({ tenant: 't', budget: 'month-tokens', level: 0.8, cause: 'e1' });
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(crossingId({ tenant: 't', budget: 'month-tokens', level: 0.8, cause: 'e1' })).toBe(a);
    expect(crossingId({ tenant: 't', budget: 'month-tokens', level: 0.95, cause: 'e1' })).not.toBe(
      a,
    );
    expect(crossingId({ tenant: 't', budget: 'month-tokens', level: 0.8, cause: 'e2' })).not.toBe(
      a,
    );
  });
});

describe('snapshot ordering', () => {
  test('later time wins; the stream sequence breaks ties', () => {
    const t1 = '2026-12-01T10:00:00.000Z';
    const t2 = '2026-12-01T10:00:00.001Z';
    expect(isAfter({ time: t1, seq: 5 }, null)).toBe(true);
    expect(isAfter({ time: t2, seq: 1 }, { time: t1, seq: 9 })).toBe(true);
    expect(isAfter({ time: t1, seq: 9 }, { time: t2, seq: 1 })).toBe(false);
    expect(isAfter({ time: t1, seq: 6 }, { time: t1, seq: 5 })).toBe(true);
    expect(isAfter({ time: t1, seq: 5 }, { time: t1, seq: 5 })).toBe(false);
  });
});

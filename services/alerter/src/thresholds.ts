import { utilisation, type WindowState } from '@holdfast/events';
import { z } from 'zod';
import type { WindowPolicy } from './holdfast-config.js';

/**
 * Threshold state of one budget window, kept per (level, budget) in the shared store.
 *
 * Hysteresis: a level is "fired" once utilisation reaches it and stays fired until
 * utilisation falls back below it; only a level that is not fired can fire. The hard level
 * (1 = 100%) fires a suspension instead of a `threshold.crossed` event.
 *
 * Ordering: replicas may handle a tenant's events out of order. Each applied change records
 * the position (event time, then stream sequence) of the snapshot that caused it; a snapshot
 * at or before that position is stale and changes nothing. Snapshots that change nothing are
 * not written, so the store is written only when a level fires or re-arms.
 */
export const HARD_LEVEL = 1;

export const Position = z.object({ time: z.string(), seq: z.number() });
export type Position = z.infer<typeof Position>;

export function isAfter(a: Position, b: Position | null): boolean {
  if (b === null) return true;
  if (a.time !== b.time) return a.time > b.time;
  return a.seq > b.seq;
}

export interface Transition {
  /** Levels newly reached (ascending); the hard level is last when present. */
  fired: number[];
  /** Levels utilisation fell back below. */
  rearmed: number[];
  /** The fired set after the change. */
  next: number[];
}

/** Levels the policy watches for a window, ascending. */
export function levels(policy: WindowPolicy): number[] {
  const soft = policy.soft.filter((s) => s > 0 && s < HARD_LEVEL);
  return policy.hard ? [...soft, HARD_LEVEL] : soft;
}

/**
 * The pure step: given the levels fired so far and a window snapshot, which levels fire and
 * which re-arm. Returns undefined when nothing changes.
 */
export function evaluate(
  firedBefore: readonly number[],
  w: Pick<WindowState, 'used' | 'limit'>,
  policy: WindowPolicy,
): Transition | undefined {
  const u = utilisation(w);
  const watched = levels(policy);
  const before = new Set(firedBefore);
  const fired = watched.filter((l) => u >= l && !before.has(l));
  // A level no longer watched (config changed) re-arms too, so the record does not keep it.
  const rearmed = firedBefore.filter((l) => u < l || !watched.includes(l));
  if (fired.length === 0 && rearmed.length === 0) return undefined;
  const next = [...firedBefore.filter((l) => !rearmed.includes(l)), ...fired].sort((a, b) => a - b);
  return { fired, rearmed, next };
}

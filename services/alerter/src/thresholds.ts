import { createHash } from 'node:crypto';
import { windowCharge, type HoldfastEvent, type WindowState } from '@holdfast/events';
import { z } from 'zod';
import type { WindowPolicy } from './holdfast-config.js';

/**
 * Threshold crossings of one budget window (docs/alerts.md, "Thresholds").
 *
 * A crossing is a property of one event: the event takes the window's `used` from below a
 * level to at or above it (`before < level * limit <= used`, `before` = `used` less what the
 * event itself charged, both at the event's time). So no replica needs the earlier events, and
 * the same crossings come out whatever order and however many replicas handle the events; a
 * dip between two events (usage aging out) is seen too. The hard level (1 = 100%) fires a
 * suspension instead of a `threshold.crossed` event.
 *
 * A level the window's record does not know yet (the alerter's first look at the window, a
 * soft threshold added, a limit changed) is "standing": when the first event handled under it
 * shows the window already at or above it, it fires once for that event.
 */
export const HARD_LEVEL = 1;

export const Position = z.object({ time: z.string(), seq: z.number() });
export type Position = z.infer<typeof Position>;

export function isAfter(a: Position, b: Position | null): boolean {
  if (b === null) return true;
  if (a.time !== b.time) return a.time > b.time;
  return a.seq > b.seq;
}

/** Levels the policy watches for a window, ascending. */
export function levels(policy: Pick<WindowPolicy, 'soft' | 'hard'>): number[] {
  const soft = policy.soft.filter((s) => s > 0 && s < HARD_LEVEL);
  return policy.hard ? [...soft, HARD_LEVEL] : soft;
}

/** At or above `level` of `limit` (a window of limit 0 is above every level once used). */
function reached(used: number, limit: number, level: number): boolean {
  return limit === 0 ? used > 0 : used >= level * limit;
}

/**
 * Levels an event crosses upward: `before` below the level, `used` (after the event) at or
 * above it. Ascending.
 */
export function crossed(
  before: number,
  w: Pick<WindowState, 'used' | 'limit'>,
  watched: readonly number[],
): number[] {
  if (w.used <= before) return [];
  return watched.filter((l) => !reached(before, w.limit, l) && reached(w.used, w.limit, l));
}

/**
 * Standing levels: those of `fresh` (levels the record did not know) that the window was at
 * or above both before and after the event (an event that crosses one is a crossing, one that
 * takes the window below it leaves it armed).
 */
export function standing(
  before: number,
  w: Pick<WindowState, 'used' | 'limit'>,
  fresh: readonly number[],
): number[] {
  return fresh.filter((l) => reached(before, w.limit, l) && reached(w.used, w.limit, l));
}

/**
 * What an event added to the window's `used` (its own unit), or 0 for an event that bills
 * nothing (refusals, extensions, overruns, suspensions: the settlement an overrun follows
 * billed it). The authority bills one amount per unit to every window of the call (Lua
 * admit/close), except where the window says it got another (`charged`: a budget added while
 * the call was in flight), so `used - charged` is the window at the event's time just before it.
 */
export function chargedBy(event: HoldfastEvent, w: Pick<WindowState, 'unit' | 'charged'>): number {
  if (!('chargedTokens' in event)) return 0;
  return windowCharge(event, w);
}

/**
 * The id of a crossing: fixed by what caused it, so a replica that handles the same event
 * again (a redelivery, a crash) makes the same event, and the stream (Nats-Msg-Id) and the
 * window's record drop the copy. `cause` is the authority event's id for a crossing, the
 * config's hash and the limit for a standing level (one per config that added it).
 */
export function crossingId(parts: {
  tenant: string;
  budget: string;
  level: number;
  cause: string;
}): string {
  const h = createHash('sha256')
    .update(`${parts.cause}\n${parts.tenant}\n${parts.budget}\n${String(parts.level)}`)
    .digest('hex');
  // A UUID's shape (version 8, "custom"), as every event id is one.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

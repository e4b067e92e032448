import { describe, expect, it } from 'vitest';
import { CapacityLimiter } from './capacity.js';

const WINDOW_MS = 60_000;

interface Arrival {
  at: number;
  tokens: number;
  requests: number;
  accepted: boolean;
}

/** The window's sums as the limiter counted them before it kept them: every entry, newest first. */
function counted(arrivals: readonly Arrival[], now: number): { tokens: number; requests: number } {
  let tokens = 0;
  let requests = 0;
  for (let i = arrivals.length - 1; i >= 0; i--) {
    const a = arrivals[i]!;
    if (a.at <= now - WINDOW_MS) break;
    if (!a.accepted) continue;
    tokens += a.tokens;
    requests += a.requests;
  }
  return { tokens, requests };
}

/** A small seeded generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Drives a limiter and a log of its arrivals side by side: each step moves the clock by
 * `step()`, then admits a request or adds output; the window the limiter reports (and its
 * verdicts) must be what counting the log gives.
 */
function run(seed: number, steps: number, step: (r: () => number) => number): void {
  const r = random(seed);
  let now = 1_000_000;
  const limiter = new CapacityLimiter(() => now);
  limiter.configure({ tokensPerMinute: 5_000, requestsPerMinute: 40, count: 'usage' });
  const log: Arrival[] = [];
  for (let i = 0; i < steps; i++) {
    now += step(r);
    const before = counted(log, now);
    if (r() < 0.8) {
      const tokens = Math.floor(r() * 400);
      const admission = limiter.admit(tokens);
      const fits = before.requests + 1 <= 40 && before.tokens + tokens <= 5_000;
      expect(admission.ok).toBe(fits);
      log.push({ at: now, tokens, requests: 1, accepted: admission.ok });
    } else {
      const tokens = Math.floor(r() * 200);
      limiter.addOutput(tokens);
      if (tokens > 0) log.push({ at: now, tokens, requests: 0, accepted: true });
    }
    expect(limiter.snapshot().window).toEqual(counted(log, now));
  }
}

describe('CapacityLimiter: the window kept as arrivals come and go', () => {
  it('reports what counting every entry gives, step by step, with refusals and output', () => {
    for (const seed of [1, 2, 3]) run(seed, 3_000, (r) => Math.floor(r() * 4_000));
  });

  it('stays exact when arrivals share a millisecond or the clock stands still', () => {
    run(4, 3_000, (r) => (r() < 0.7 ? 0 : Math.floor(r() * 30_000)));
  });

  it('falls back to counting when the clock goes back', () => {
    run(5, 2_000, (r) => Math.floor(r() * 4_000) - 1_000);
  });

  it('keeps the sums when the oldest entries are dropped past its limit of 200,000', () => {
    const now = 0;
    const limiter = new CapacityLimiter(() => now);
    for (let i = 0; i < 200_010; i++) limiter.admit(i % 7);
    // The 200,001st arrival dropped the oldest 10,001 at once: 190,009 are left.
    let tokens = 0;
    for (let i = 10_001; i < 200_010; i++) tokens += i % 7;
    expect(limiter.snapshot().window).toEqual({ tokens, requests: 190_009 });
  });

  it('keeps the sums when entries the window already left are dropped', () => {
    let now = 0;
    const limiter = new CapacityLimiter(() => now);
    // 150,000 arrivals a minute and more ago, then 60,000 in the window.
    for (let i = 0; i < 150_000; i++) limiter.admit(3);
    now = 70_000;
    limiter.view();
    for (let i = 0; i < 60_000; i++) limiter.admit(i % 5);
    let tokens = 0;
    for (let i = 0; i < 60_000; i++) tokens += i % 5;
    expect(limiter.snapshot().window).toEqual({ tokens, requests: 60_000 });
  });
});

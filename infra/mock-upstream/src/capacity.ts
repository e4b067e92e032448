import { Err, Ok, type Result } from '@holdfast/runtime';
import type { Capacity } from './behaviour.js';

const WINDOW_MS = 60_000;
// Enough for hours of a busy test; older arrivals drop out of the per-minute statistics.
const MAX_ENTRIES = 200_000;
// Dropped together, once past MAX_ENTRIES: shifting one out each arrival moved the whole array
// (30 us an arrival at 200,000, a third of the mock's time at 300 calls/s once a run filled it).
const DROP_CHUNK = 10_000;

interface Entry {
  at: number;
  tokens: number;
  /** 1 for a request's arrival, 0 for output added when a `usage`-counted call ends. */
  requests: number;
  accepted: boolean;
}

/** The account's window as a provider reports it in its rate-limit headers. */
export interface CapacityView {
  limitTokens: number | null;
  remainingTokens: number | null;
  /** Until the token window is empty again. */
  resetTokensMs: number;
  limitRequests: number | null;
  remainingRequests: number | null;
  resetRequestsMs: number;
}

/** A request over a limit: which one, when it fits again, and the window as it stands. */
interface RateLimited {
  code: 'rate_limited';
  limit: 'tokens' | 'requests';
  retryAfterMs: number;
  requested: number;
  used: number;
  view: CapacityView;
}

/** Admitted: the window with the request in it. */
export type Admission = Result<CapacityView, RateLimited>;

interface CapacityMinute {
  /** Start of the UTC minute. */
  minute: string;
  requests: number;
  tokens: number;
  acceptedRequests: number;
  acceptedTokens: number;
  /** Requests answered 429 because the window was full. */
  rejected: number;
}

export interface CapacityStats {
  config: Capacity | null;
  rejected: number;
  /** What arrived per fixed UTC minute (tokens as the limit counts them). */
  minutes: CapacityMinute[];
  /** The most that arrived in any sliding 60 s, all arrivals and accepted ones. */
  peak: { tokens: number; requests: number; acceptedTokens: number; acceptedRequests: number };
  /** The sliding window now. */
  window: { tokens: number; requests: number };
}

/**
 * The account's tokens-per-minute and requests-per-minute limits over a sliding 60 s window
 * (exact: every accepted arrival is kept until it leaves the window), so "never more than the
 * limit in any 60 s" holds for what the mock accepts. Arrivals are recorded even while no limit
 * is set, so a test can measure what a gateway sent.
 */
export class CapacityLimiter {
  private config: Capacity | null = null;
  private entries: Entry[] = [];
  private rejected = 0;
  /**
   * The window's sums, kept as entries arrive and leave it: `entries[start..]` are in it.
   * Summing every entry of the window on each request cost the mock 0.4 ms a call once a minute
   * held 30,000 (a bench's closed loop), more in whichever phase came soon after one (issue 14).
   * Kept while arrivals come in time order and the window only moves forward; otherwise the
   * sums are counted afresh, as before.
   */
  private window = { start: 0, tokens: 0, requests: 0, now: -Infinity, inOrder: true };

  constructor(private readonly now: () => number = Date.now) {}

  configure(config: Capacity | null): void {
    this.config = config;
  }

  get counting(): Capacity['count'] {
    return this.config?.count ?? 'requested';
  }

  /** A request arrives costing `tokens`: admitted into the window, or refused. */
  admit(tokens: number): Admission {
    const now = this.now();
    const window = this.windowSums(now);
    const tpm = this.config?.tokensPerMinute ?? null;
    const rpm = this.config?.requestsPerMinute ?? null;
    const overRequests = rpm !== null && window.requests + 1 > rpm;
    const overTokens = tpm !== null && window.tokens + tokens > tpm;
    if (overRequests || overTokens) {
      this.push({ at: now, tokens, requests: 1, accepted: false });
      this.rejected += 1;
      const retryTokens = overTokens
        ? this.freedAfter(now, window.tokens + tokens - tpm, 'tokens')
        : 0;
      const retryRequests = overRequests
        ? this.freedAfter(now, window.requests + 1 - rpm, 'requests')
        : 0;
      return Err({
        code: 'rate_limited',
        limit: retryTokens >= retryRequests && overTokens ? 'tokens' : 'requests',
        retryAfterMs: Math.max(retryTokens, retryRequests),
        requested: tokens,
        used: overTokens ? window.tokens : window.requests,
        view: this.view(now),
      });
    }
    this.push({ at: now, tokens, requests: 1, accepted: true });
    return Ok(this.view(now));
  }

  /** Output written by a call, when the limit counts `usage`. */
  addOutput(tokens: number): void {
    if (tokens > 0) this.push({ at: this.now(), tokens, requests: 0, accepted: true });
  }

  reset(): void {
    this.entries = [];
    this.rejected = 0;
    this.window = { start: 0, tokens: 0, requests: 0, now: -Infinity, inOrder: true };
  }

  view(now = this.now()): CapacityView {
    const window = this.windowSums(now);
    const tpm = this.config?.tokensPerMinute ?? null;
    const rpm = this.config?.requestsPerMinute ?? null;
    const lastAt = (kind: 'tokens' | 'requests') =>
      this.entries.findLast((e) => e.accepted && e[kind] > 0 && e.at > now - WINDOW_MS)?.at;
    const resetIn = (at: number | undefined) => (at === undefined ? 0 : at + WINDOW_MS - now);
    return {
      limitTokens: tpm,
      remainingTokens: tpm === null ? null : Math.max(0, tpm - window.tokens),
      resetTokensMs: resetIn(lastAt('tokens')),
      limitRequests: rpm,
      remainingRequests: rpm === null ? null : Math.max(0, rpm - window.requests),
      resetRequestsMs: resetIn(lastAt('requests')),
    };
  }

  snapshot(): CapacityStats {
    const now = this.now();
    const minutes = new Map<number, CapacityMinute>();
    for (const e of this.entries) {
      const start = Math.floor(e.at / WINDOW_MS) * WINDOW_MS;
      let m = minutes.get(start);
      if (!m) {
        m = {
          minute: new Date(start).toISOString(),
          requests: 0,
          tokens: 0,
          acceptedRequests: 0,
          acceptedTokens: 0,
          rejected: 0,
        };
        minutes.set(start, m);
      }
      m.requests += e.requests;
      m.tokens += e.tokens;
      if (e.accepted) {
        m.acceptedRequests += e.requests;
        m.acceptedTokens += e.tokens;
      } else m.rejected += 1;
    }
    const all = peak(this.entries);
    const accepted = peak(this.entries.filter((e) => e.accepted));
    return {
      config: this.config,
      rejected: this.rejected,
      minutes: [...minutes.values()],
      peak: {
        tokens: all.tokens,
        requests: all.requests,
        acceptedTokens: accepted.tokens,
        acceptedRequests: accepted.requests,
      },
      window: this.windowSums(now),
    };
  }

  private push(entry: Entry): void {
    const w = this.window;
    const last = this.entries.at(-1);
    if (last && entry.at < last.at) w.inOrder = false;
    this.entries.push(entry);
    if (entry.accepted) {
      w.tokens += entry.tokens;
      w.requests += entry.requests;
    }
    if (this.entries.length > MAX_ENTRIES) {
      const dropped = this.entries.splice(0, this.entries.length - MAX_ENTRIES + DROP_CHUNK);
      // Those from the window's start on are still in its sums.
      for (let i = w.start; i < dropped.length; i++) {
        const e = dropped[i]!;
        if (!e.accepted) continue;
        w.tokens -= e.tokens;
        w.requests -= e.requests;
      }
      w.start = Math.max(0, w.start - dropped.length);
    }
  }

  /** Accepted tokens and requests in the window ending now. */
  private windowSums(now: number): { tokens: number; requests: number } {
    const w = this.window;
    if (!w.inOrder || now < w.now) return this.countWindow(now);
    w.now = now;
    while (w.start < this.entries.length && this.entries[w.start]!.at <= now - WINDOW_MS) {
      const e = this.entries[w.start]!;
      if (e.accepted) {
        w.tokens -= e.tokens;
        w.requests -= e.requests;
      }
      w.start += 1;
    }
    return { tokens: w.tokens, requests: w.requests };
  }

  /** The window's sums counted entry by entry, newest first. */
  private countWindow(now: number): { tokens: number; requests: number } {
    let tokens = 0;
    let requests = 0;
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const e = this.entries[i]!;
      if (e.at <= now - WINDOW_MS) break;
      if (!e.accepted) continue;
      tokens += e.tokens;
      requests += e.requests;
    }
    return { tokens, requests };
  }

  /** Milliseconds until `need` tokens (or requests) of the window have left it. */
  private freedAfter(now: number, need: number, kind: 'tokens' | 'requests'): number {
    let freed = 0;
    for (const e of this.entries) {
      if (e.at <= now - WINDOW_MS || !e.accepted) continue;
      freed += e[kind];
      if (freed >= need) return e.at + WINDOW_MS - now;
    }
    // More than the whole limit: it never fits; a minute is the honest answer.
    return WINDOW_MS;
  }
}

/** The largest sums of arrivals within any 60 s span. */
function peak(entries: readonly Entry[]): { tokens: number; requests: number } {
  let start = 0;
  let tokens = 0;
  let requests = 0;
  const best = { tokens: 0, requests: 0 };
  for (const e of entries) {
    tokens += e.tokens;
    requests += e.requests;
    while (entries[start]!.at <= e.at - WINDOW_MS) {
      tokens -= entries[start]!.tokens;
      requests -= entries[start]!.requests;
      start += 1;
    }
    best.tokens = Math.max(best.tokens, tokens);
    best.requests = Math.max(best.requests, requests);
  }
  return best;
}

import { describe, expect, it } from 'vitest';
import { InlineGuard } from './inline-guard.js';

let clock = 0;
const guard = () =>
  new InlineGuard({
    budgetMs: 4,
    burstMs: 50,
    refillMsPerSecond: 5,
    demoteMs: 60_000,
    now: () => clock,
  });
/** Whether the guard lets the tenant count inline at that time. */
function allowsAt(g: InlineGuard, tenant: string, ms: number): boolean {
  clock = ms;
  return g.allows(tenant);
}

describe('InlineGuard', () => {
  it('lets counts within the budget through, however many', () => {
    const g = guard();
    for (let i = 0; i < 10_000; i++) g.counted('a', 3.9, i);
    expect(allowsAt(g, 'a', 10_000)).toBe(true);
  });

  it('demotes a tenant at once for a count that alone takes more than its allowance', () => {
    const g = guard();
    g.counted('a', 178, 1_000);
    expect(allowsAt(g, 'a', 1_001)).toBe(false);
    expect(allowsAt(g, 'b', 1_001)).toBe(true);
    expect(allowsAt(g, 'a', 61_001)).toBe(true);
  });

  it('absorbs a slow count now and then (a pause), not slow counts one after another', () => {
    const g = guard();
    // 14 ms every 2 s is 10 ms past the budget, the 10 refilled: never demoted.
    for (let t = 0; t < 600_000; t += 2_000) g.counted('busy', 14, t);
    expect(allowsAt(g, 'busy', 600_000)).toBe(true);
    // 20 ms four times in a row is 64 ms past the budget, over the 50 ms at once.
    for (const t of [0, 10, 20]) g.counted('slow', 20, t);
    expect(allowsAt(g, 'slow', 30)).toBe(true);
    g.counted('slow', 20, 40);
    expect(allowsAt(g, 'slow', 50)).toBe(false);
  });
});

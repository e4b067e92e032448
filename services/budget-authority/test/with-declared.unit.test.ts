import { describe, expect, it } from 'vitest';
import { withDeclared } from '../src/scripts.js';

/** A script that asks for one key more on each of its first `asks` runs, then answers ok. */
function asking(asks: number) {
  const seen: (readonly string[])[] = [];
  const once = (extra: readonly string[]) => {
    seen.push(extra);
    const value = seen.length <= asks ? ['keys', `k${seen.length}`] : ['ok'];
    return Promise.resolve({ ok: true as const, value });
  };
  return { once, seen };
}

describe('withDeclared', () => {
  it('runs a script again with every key it asked for, as often as `askings` allows', async () => {
    const s = asking(3);
    expect(await withDeclared(s.once, { askings: 3 })).toEqual({ ok: true, value: ['ok'] });
    expect(s.seen).toEqual([[], ['k1'], ['k1', 'k2'], ['k1', 'k2', 'k3']]);
  });

  it('throws on an asking past `askings` (a bug), or returns it with lastAsking: return', async () => {
    await expect(withDeclared(asking(3).once)).rejects.toThrow('a script still lacks keys: k3');
    const r = await withDeclared(asking(9).once, { askings: 5, lastAsking: 'return' });
    expect(r).toEqual({ ok: true, value: ['keys', 'k6'] });
  });
});

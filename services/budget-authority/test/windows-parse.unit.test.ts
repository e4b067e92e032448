import type { WindowState } from '@holdfast/events';
import { expect, test } from 'vitest';
import { parseWindows } from '../src/windows.js';

/**
 * The scripts' window list as parseWindows read it before issue 14's rewrite (its tail written
 * another way): the oracle.
 */
function parseWindowsBefore(text: string): WindowState[] {
  if (!text) return [];
  return text.split(';').map((entry) => {
    const fields = entry.split(',');
    const [tenant = '', budget = '', limit = '0', used = '0', held = '0', enforce = '1'] = fields;
    const [window, unit] = budget.split('-') as [WindowState['window'], WindowState['unit']];
    const state: WindowState = {
      tenant,
      budget: budget,
      window,
      unit,
      limit: Number(limit),
      used: Number(used),
      held: Number(held),
      enforce: enforce === '1',
    };
    // The tail, consumed from the front: `k|u,<subject>`, then `c,<charged>`, then `r`.
    const tail = fields.slice(6);
    if (tail[0] === 'k' || tail[0] === 'u') {
      const [kind, who] = tail.splice(0, 2);
      if (who) Object.assign(state, { scope: kind === 'k' ? 'key' : 'end_user', subject: who });
    }
    if (tail[0] === 'c') state.charged = Number(tail.splice(0, 2)[1]);
    if (tail[0] === 'r') state.removed = true;
    return state;
  });
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

const TENANTS = ['bench-team', 'acme', 'a', ''];
const BUDGETS = ['month-tokens', 'day-usd', 'minute-tokens', 'month', 'a-b-c', '-usd', 'day-', ''];
const NUMBERS = ['0', '1', '521', '1000000000000', '-3', '1e3', '', 'x', '9007199254740993'];
const TAILS = [[], ['k', 'key_1'], ['u', 'user@x'], ['k', ''], ['u'], ['c', '42'], ['c'], ['r']];

/** A window as the scripts write it, and odd ones: missing fields, extras, every tail. */
function entry(): string {
  const fields = [pick(TENANTS), pick(BUDGETS), pick(NUMBERS), pick(NUMBERS), pick(NUMBERS)];
  fields.push(pick(['1', '0', '', '2']));
  for (let i = Math.floor(Math.random() * 3); i > 0; i--) fields.push(...pick(TAILS));
  return fields.slice(0, Math.random() < 0.1 ? Math.floor(Math.random() * 6) : undefined).join(',');
}

test('parseWindows reads every window list as it did before, field for field and key for key', () => {
  const texts = [
    '',
    ';',
    ',',
    'a',
    'a;',
    ';a',
    'bench-team,month-tokens,1,2,3,1;acme,day-usd,4,5,6,0,c,7,r',
  ];
  for (let i = 0; i < 5_000; i++) {
    texts.push(Array.from({ length: 1 + Math.floor(Math.random() * 4) }, entry).join(';'));
  }
  for (const text of texts) {
    const now = parseWindows(text);
    const before = parseWindowsBefore(text);
    expect(now, text).toStrictEqual(before);
    expect(JSON.stringify(now), text).toBe(JSON.stringify(before));
    now.forEach((w, i) => expect(Object.keys(w), text).toEqual(Object.keys(before[i]!)));
  }
});

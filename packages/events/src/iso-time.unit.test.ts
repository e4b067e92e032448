import { expect, test } from 'vitest';
import { isoTime } from './iso-time.js';

/** Milliseconds near now (where the authority's times are), across the epoch, and at the edges. */
function times(): number[] {
  const now = Date.now();
  const out = [
    0, -1, 1, 999, 1_000, -999, -1_000, -1_001, 253_402_300_799_999, 253_402_300_800_000,
  ];
  out.push(-62_167_219_200_000, -62_167_219_200_001, 8.64e15, -8.64e15, 1.5, -0.5);
  for (let i = 0; i < 20_000; i++) out.push(now + Math.floor((Math.random() - 0.5) * 4e6));
  for (let i = 0; i < 20_000; i++) out.push(Math.floor((Math.random() - 0.5) * 1.6e13));
  for (let i = 0; i < 2_000; i++) out.push(now + i); // one second after another, in order
  return out;
}

test('isoTime writes what Date.prototype.toISOString writes, for any time in any order', () => {
  for (const ms of times()) expect(isoTime(ms), String(ms)).toBe(new Date(ms).toISOString());
});

test('isoTime throws as toISOString does for a time no Date can hold', () => {
  for (const ms of [NaN, Infinity, -Infinity, 8.64e15 + 1, -8.64e15 - 1]) {
    expect(() => new Date(ms).toISOString()).toThrow(RangeError);
    expect(() => isoTime(ms), String(ms)).toThrow(RangeError);
  }
});

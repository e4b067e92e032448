import { describe, expect, it } from 'vitest';
import { over, row } from './consumers.js';
import { usageOf } from './edge.js';

describe('row', () => {
  it('keeps every column of the table, the time in unix seconds', () => {
    const event = {
      id: 'e1',
      type: 'reservation.settled',
      time: 1_764_000_000_999,
      tenant: 't',
      tokens: 25,
      microUsd: 11,
      windows: [],
    };
    expect(JSON.parse(row(event))).toEqual({
      id: 'e1',
      type: 'reservation.settled',
      tenant: 't',
      time: 1_764_000_000,
      tokens: 25,
      micro_usd: 11,
    });
  });
});

describe('over', () => {
  it('counts what is held with what is used', () => {
    const w = { budget: 'b', limit: 100, used: 70, held: 10 };
    expect(over(w, 0.8)).toBe(true);
    expect(over({ ...w, held: 9 }, 0.8)).toBe(false);
  });
});

describe('usageOf', () => {
  it("reads an OpenAI reply's usage, and nothing from a reply without one", () => {
    const reply = { usage: { prompt_tokens: 9, completion_tokens: 16, total_tokens: 25 } };
    expect(usageOf(JSON.stringify(reply))).toEqual({ prompt: 9, completion: 16 });
    expect(usageOf('{"choices":[]}')).toBeUndefined();
    expect(usageOf('data: {}')).toBeUndefined();
  });
});

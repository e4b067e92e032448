import { describe, expect, it } from 'vitest';
import { admitReply, settleReply } from './authority.js';
import { BENCH_PLAN, CallBuilder, cost } from './plan.js';

const caller = { tenant: 'bench-team', org: 'bench-org', keyId: 'bench-1', useCase: 'UC-BENCH' };

describe('cost', () => {
  it('is tokens in and out, and micro-USD rounded up', () => {
    // 9 x 0.15 + 16 x 0.6 = 10.95
    expect(cost(BENCH_PLAN, 9, 16)).toEqual({ tokens: 25, usd: 11 });
  });
});

describe('CallBuilder', () => {
  const b = new CallBuilder(BENCH_PLAN, 60_000);

  it("builds admit's FCALL as floor.lua's header lists its keys and arguments", () => {
    const call = b.admit(
      { ...caller, model: 'gpt-4o-mini', prompt: 9, maxTokens: 512 },
      { event: 'e1', reservation: 'r1' },
      1_000,
    );
    expect(call.fn).toBe('floor_admit');
    expect(call.keys).toEqual([
      'floor:{bench-org}:w',
      'floor:{bench-org}:hold:r1',
      'floor:{bench-org}:outbox',
    ]);
    const a = call.args;
    expect(a).toHaveLength(22);
    expect(a[0]).toBe('1000');
    expect(a.slice(1, 4)).toEqual(['1000000000000', '86400000', '30']);
    expect(a.slice(10, 13)).toEqual([
      'bench-team/month-tokens',
      'bench-team/day-usd',
      'bench-org/month-usd',
    ]);
    expect(a.slice(13, 16)).toEqual(['e1', 'r1', '60000']);
    expect(JSON.parse(`{${a[16]},${a[17]}}`)).toEqual({
      ...caller,
      model: 'gpt-4o-mini',
      promptTokens: 9,
      maxTokens: 512,
      tokens: 521,
      microUsd: 309,
    });
    // Held: 521 tokens on the tokens window, 309 micro-USD on the two USD windows.
    expect(a.slice(18, 21)).toEqual(['521', '309', '309']);
    expect(a[21]).toBe('floor.events.bench-team.reservation.created');
  });

  it("builds settle's FCALL with what the call used, on the same hold", () => {
    const call = b.settle(
      { ...caller, model: 'gpt-4o-mini', reservationId: 'r1', prompt: 9, completion: 16 },
      'e2',
      2_000,
    );
    expect(call.fn).toBe('floor_settle');
    expect(call.keys[1]).toBe('floor:{bench-org}:hold:r1');
    expect(call.args.slice(18)).toEqual([
      '25',
      '11',
      '11',
      'floor.events.bench-team.reservation.settled',
    ]);
  });
});

describe('the scripts answers', () => {
  it('reads admit as admitted, refused by a window, or a duplicate', () => {
    expect(admitReply([1], 'r')).toEqual({ ok: true, reservationId: 'r' });
    expect(admitReply([0, 2], 'r')).toEqual({ ok: false, code: 'budget_exceeded', window: 2 });
    expect(admitReply([2], 'r')).toEqual({ ok: false, code: 'duplicate' });
  });

  it('reads settle as settled or no hold', () => {
    expect(settleReply([1])).toEqual({ ok: true });
    expect(settleReply([0])).toEqual({ ok: false, code: 'no_hold' });
  });
});

import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { scriptLibrary } from '../src/scripts.js';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';

/**
 * Each FCALL argument costs Redis ~650 instructions before the script runs (a Lua string and
 * its slot in ARGV), read or not (docs/benchmarks.md, "the scripts' arguments"). A call by no
 * key, for no end user, with no cache writes, audio, tools or retried requests sends its admit
 * and settle what their common path reads and what a refusal reports; what only adaptive
 * mode, an end user's cap, an overrun, a release or the rarer usage read travels in one text
 * each, matched out only where read (a field so costs about as much as an argument: only
 * what most calls never read is worth packing).
 */
test('a plain call sends admit and close only the arguments their common path reads', async ({
  start,
}) => {
  const h = await start(BASE_CONFIG);
  const redis = h.authority.ctx.redis as Redis;
  const calls: string[][] = [];
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command, stream) => {
    if (command.name === 'fcall') calls.push(command.args.map(String));
    return send(command, stream);
  };
  // Twice: the first call of a plan sends it in full (NOPLAN), the second by reference.
  for (let i = 0; i < 2; i++) {
    const c = admissionOf(await h.client.admit(miniCall(100, 200)));
    const s = await h.client.settle({
      reservationId: c.reservationId,
      tenant: 'support-bot',
      usage: { promptTokens: 100, completionTokens: 50 },
    });
    expect(s).toMatchObject({ ok: true, value: { status: 'settled' } });
  }
  redis.sendCommand = send;
  const { admit, close } = scriptLibrary().functions;
  // The call's own arguments: after the keys, before the plan by reference (id, '0', no
  // budgets of the call's own: '0').
  const own = (fn: string) => {
    const call = calls.filter((c) => c[0] === fn).pop()!;
    expect(call.slice(-2)).toEqual(['0', '0']);
    return call.length - 2 - Number(call[1]) - 3;
  };
  expect(own(admit)).toBe(26);
  expect(own(close)).toBe(13);
  // Each key costs Redis a string and a slot too: a reserve call's admit names no adaptive
  // samples list (only adaptive mode reads one; admit.lua ARGV[25]).
  const keys = (fn: string) => {
    const call = calls.filter((c) => c[0] === fn).pop()!;
    return call.slice(2, 2 + Number(call[1]));
  };
  expect(keys(admit).filter((k) => k.includes(':out:'))).toEqual([]);
});

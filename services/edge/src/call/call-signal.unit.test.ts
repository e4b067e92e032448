import { setTimeout as nodeSleep } from 'node:timers/promises';
import { sleep } from '@holdfast/retry';
import { describe, expect, test } from 'vitest';
import { CallSignal } from './call-signal.js';

/** The same script of listeners and an abort, on a CallSignal and on a real AbortSignal. */
function script(make: () => { signal: AbortSignal; abort: (reason: unknown) => void }) {
  const { signal, abort } = make();
  const seen: string[] = [];
  const before = { aborted: signal.aborted, reason: signal.reason as unknown };
  const a = function (this: unknown, e: Event) {
    seen.push(`a:${e.type}:${this === signal}`);
  };
  const b = () => seen.push('b');
  const removed = () => seen.push('removed');
  const object = { handleEvent: (e: Event) => seen.push(`object:${e.type}`) };
  signal.addEventListener('abort', a);
  signal.addEventListener('abort', a); // the same listener twice: once
  signal.addEventListener('abort', b, { once: true });
  signal.addEventListener('abort', removed);
  signal.addEventListener('abort', object);
  signal.addEventListener('other', () => seen.push('other'));
  signal.removeEventListener('abort', removed);
  expect(() => signal.throwIfAborted()).not.toThrow();
  const reason = new Error('gone');
  abort(reason);
  abort(new Error('again')); // a second abort does nothing
  signal.addEventListener('abort', () => seen.push('late')); // after the abort: never called
  let thrown: unknown;
  try {
    signal.throwIfAborted();
  } catch (err) {
    thrown = err;
  }
  return { before, seen, aborted: signal.aborted, sameReason: signal.reason === reason, thrown };
}

describe('CallSignal', () => {
  test('is read and listened to as an AbortSignal is', () => {
    const light = script(() => {
      const s = new CallSignal();
      return { signal: s, abort: (r) => s.abort(r) };
    });
    const real = script(() => {
      const c = new AbortController();
      return { signal: c.signal, abort: (r) => c.abort(r) };
    });
    expect(light).toEqual(real);
    expect(light.seen).toEqual(['a:abort:true', 'b', 'object:abort']);
    expect(light.thrown).toEqual(new Error('gone'));
  });

  test("Node's timers/promises and @holdfast/retry's sleep end on its abort, as on an AbortSignal's", async () => {
    for (const make of [() => new CallSignal(), () => new AbortController()]) {
      const s = make();
      const signal = s instanceof CallSignal ? s : s.signal;
      const abort = (r: unknown) => s.abort(r);
      const reason = new Error('left');
      const waits = [
        nodeSleep(60_000, undefined, { signal }).then(
          () => 'slept',
          (e: Error & { cause?: unknown }) => `${e.name}:${e.cause === reason}`,
        ),
        sleep(60_000, signal),
      ];
      abort(reason);
      expect(await Promise.all(waits)).toEqual(['AbortError:true', false]);
      // Already aborted: at once.
      expect(await sleep(60_000, signal)).toBe(false);
      await expect(nodeSleep(60_000, undefined, { signal })).rejects.toMatchObject({
        name: 'AbortError',
      });
    }
  });

  test('a listener removed while it waits leaves nothing behind to call', () => {
    const s = new CallSignal();
    let calls = 0;
    const f = () => calls++;
    for (let i = 0; i < 1_000; i++) {
      s.addEventListener('abort', f);
      s.removeEventListener('abort', f);
    }
    s.abort(new Error('x'));
    expect(calls).toBe(0);
  });
});

import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { every } from './every.js';
import type { Logger } from './logger.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const quiet = () => ({ warn: vi.fn(), debug: vi.fn() });
const asLogger = (l: ReturnType<typeof quiet>) => l as unknown as Logger;

/** A task whose passes stay under way until `finish()`; counts the passes started. */
function slowTask() {
  const t = { started: 0, inFlight: 0, most: 0, finish: () => {} };
  const run = () => {
    t.started++;
    t.inFlight++;
    t.most = Math.max(t.most, t.inFlight);
    return new Promise<void>((resolve) => {
      t.finish = () => {
        t.inFlight--;
        resolve();
      };
    });
  };
  return { t, run };
}

test('runs every period; a slow pass delays the next instead of stacking', async () => {
  const { t, run } = slowTask();
  const p = every(100, run, { logger: asLogger(quiet()), failed: 'x' });
  await vi.advanceTimersByTimeAsync(99);
  expect(t.started).toBe(0);
  await vi.advanceTimersByTimeAsync(1);
  expect(t.started).toBe(1);
  // Ten periods with the pass still under way: no second pass.
  await vi.advanceTimersByTimeAsync(1_000);
  expect(t.started).toBe(1);
  t.finish();
  await vi.advanceTimersByTimeAsync(100);
  expect(t.started).toBe(2);
  expect(t.most).toBe(1);
  t.finish();
  await p.stop();
});

test('a pass that fails is logged at its level with errorMessage, and the next pass runs', async () => {
  const logger = quiet();
  let passes = 0;
  const p = every(
    50,
    () => {
      passes++;
      if (passes === 1) return Promise.reject(new Error('redis down'));
      // A task that throws before returning a promise is caught too.
      if (passes === 2) throw new Error('not even a promise');
      return Promise.resolve();
    },
    { logger: asLogger(logger), failed: 'sweep failed' },
  );
  await vi.advanceTimersByTimeAsync(150);
  expect(passes).toBe(3);
  expect(logger.warn.mock.calls).toEqual([
    [{ err: 'redis down' }, 'sweep failed'],
    [{ err: 'not even a promise' }, 'sweep failed'],
  ]);
  await p.stop();

  const debug = quiet();
  const q = every(50, () => Promise.reject(new Error('no info')), {
    logger: asLogger(debug),
    failed: 'consumer info failed',
    level: 'debug',
  });
  await vi.advanceTimersByTimeAsync(50);
  expect(debug.debug).toHaveBeenCalledWith({ err: 'no info' }, 'consumer info failed');
  expect(debug.warn).not.toHaveBeenCalled();
  await q.stop();
});

test('stop() waits for the pass under way; no pass starts after it; a second stop() is harmless', async () => {
  const { t, run } = slowTask();
  const p = every(100, run, { logger: asLogger(quiet()), failed: 'x' });
  await vi.advanceTimersByTimeAsync(100);
  expect(t.inFlight).toBe(1);
  let stopped = false;
  const stopping = p.stop().then(() => (stopped = true));
  await vi.advanceTimersByTimeAsync(500);
  expect(stopped).toBe(false);
  t.finish();
  await stopping;
  expect(t.inFlight).toBe(0);
  await vi.advanceTimersByTimeAsync(1_000);
  expect(t.started).toBe(1);
  await p.stop();
  expect(vi.getTimerCount()).toBe(0);
});

test('the timer does not keep the process alive', async () => {
  const spy = vi.spyOn(globalThis, 'setInterval');
  const p = every(100, () => Promise.resolve(), { logger: asLogger(quiet()), failed: 'x' });
  const timer = spy.mock.results[0]!.value as NodeJS.Timeout;
  expect(timer.hasRef()).toBe(false);
  spy.mockRestore();
  await p.stop();
});

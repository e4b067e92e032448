import { expect, test } from 'vitest';
import { sleep, Wakeup } from './sleep.js';

/** Whether `p` settles within `ms`. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true), sleep(ms).then(() => false)]);
}

test('sleep resolves false as soon as its signal aborts, true when the time is up', async () => {
  expect(await sleep(1)).toBe(true);
  const stop = new AbortController();
  const slept = sleep(60_000, stop.signal);
  stop.abort();
  expect(await slept).toBe(false);
});

test('a wake ends every wait in progress at once, with true; a wait begun after it is not cut', async () => {
  const wakeup = new Wakeup();
  const waits = [wakeup.sleep(60_000), wakeup.sleep(60_000)];
  expect(wakeup.sleeping).toBe(2);
  expect(wakeup.wake()).toBe(2);
  expect(await Promise.all(waits)).toEqual([true, true]);
  expect(wakeup.sleeping).toBe(0);
  const later = wakeup.sleep(60_000);
  expect(await settledWithin(later, 20)).toBe(false);
  wakeup.wake();
  expect(await later).toBe(true);
});

test('a wait given the wakes before a wake that came since does not wait at all', async () => {
  const wakeup = new Wakeup();
  const before = wakeup.wakes;
  wakeup.wake();
  expect(wakeup.wakes).toBe(before + 1);
  expect(await settledWithin(wakeup.sleep(60_000, undefined, before), 20)).toBe(true);
  expect(await settledWithin(wakeup.sleep(60_000, undefined, wakeup.wakes), 20)).toBe(false);
  wakeup.wake();
});

test('an abort still ends a wakeable wait with false, and leaves nothing for a wake', async () => {
  const wakeup = new Wakeup();
  const stop = new AbortController();
  const slept = wakeup.sleep(60_000, stop.signal);
  stop.abort();
  expect(await slept).toBe(false);
  expect(wakeup.sleeping).toBe(0);
  expect(wakeup.wake()).toBe(0);
  expect(await wakeup.sleep(60_000, stop.signal, -1)).toBe(false);
});

import { createLogger } from '@holdfast/runtime';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Batcher } from './batcher.js';

const logger = createLogger({ name: 'test', level: 'silent' });

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('Batcher', () => {
  afterEach(() => vi.useRealTimers());

  it('cuts a batch when it is full', async () => {
    const flushed: number[][] = [];
    const b = new Batcher<number>({
      maxItems: 3,
      maxWaitMs: 60_000,
      flush: (items) => Promise.resolve(void flushed.push(items)),
      logger,
    });
    for (let i = 0; i < 7; i++) await b.add(i);
    expect(flushed).toEqual([
      [0, 1, 2],
      [3, 4, 5],
    ]);
    expect(b.size).toBe(1);
    await b.drain();
    expect(flushed.at(-1)).toEqual([6]);
  });

  it('cuts a batch when its first item has waited maxWaitMs', async () => {
    vi.useFakeTimers();
    const flushed: number[][] = [];
    const b = new Batcher<number>({
      maxItems: 100,
      maxWaitMs: 5_000,
      flush: (items) => Promise.resolve(void flushed.push(items)),
      logger,
    });
    await b.add(1);
    await vi.advanceTimersByTimeAsync(4_000);
    await b.add(2);
    expect(flushed).toEqual([]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(flushed).toEqual([[1, 2]]);
  });

  it('runs one flush at a time and holds add() back while a full batch waits (backpressure)', async () => {
    const gate = deferred();
    const flushed: number[][] = [];
    let running = 0;
    let maxRunning = 0;
    const b = new Batcher<number>({
      maxItems: 2,
      maxWaitMs: 60_000,
      flush: async (items) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        if (flushed.length === 0) await gate.promise;
        flushed.push(items);
        running--;
      },
      logger,
    });
    await b.add(1);
    await b.add(2); // first batch handed over; its flush blocks on the gate
    await b.add(3);
    let fourthAccepted = false;
    const fourth = Promise.resolve(b.add(4)).then(() => (fourthAccepted = true));
    await new Promise((r) => setImmediate(r));
    expect(fourthAccepted).toBe(false); // second batch is full and the first is still flushing
    gate.resolve();
    await fourth;
    await b.drain();
    expect(flushed).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(maxRunning).toBe(1);
  });

  it('logs a flush that throws and keeps going', async () => {
    const flushed: number[][] = [];
    const b = new Batcher<number>({
      maxItems: 1,
      maxWaitMs: 60_000,
      flush: (items) => {
        if (items[0] === 1) return Promise.reject(new Error('bug'));
        flushed.push(items);
        return Promise.resolve();
      },
      logger,
    });
    await b.add(1);
    await b.add(2);
    await b.drain();
    expect(flushed).toEqual([[2]]);
  });

  it('holds the filling and the flushing batch, those opened at least minAgeMs ago', async () => {
    vi.useFakeTimers();
    const flushing = deferred();
    const b = new Batcher<number>({
      maxItems: 2,
      maxWaitMs: 60_000,
      flush: () => flushing.promise,
      logger,
    });
    expect(b.add(1)).toBeUndefined();
    expect([...b.held(0)]).toEqual([1]);
    expect([...b.held(1_000)]).toEqual([]);
    await vi.advanceTimersByTimeAsync(1_000);
    await b.add(2); // full: handed to the flush, which holds it
    await vi.advanceTimersByTimeAsync(500);
    expect(b.add(3)).toBeUndefined();
    // The flushing batch was opened 1.5 s ago, the filling one just now.
    expect([...b.held(1_000)]).toEqual([1, 2]);
    expect([...b.held(0)]).toEqual([1, 2, 3]);
    flushing.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect([...b.held(0)]).toEqual([3]);
  });
});

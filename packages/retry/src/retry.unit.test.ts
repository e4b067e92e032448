import { describe, expect, test } from 'vitest';
import { retry, type Outcome } from './retry.js';
import { Wakeup } from './sleep.js';

const fast = { initialMs: 1, maxMs: 4 };

describe('retry', () => {
  test('retries a rejected attempt until it resolves', async () => {
    let calls = 0;
    const value = await retry(
      async (n) => {
        calls++;
        if (n < 3) throw new Error(`attempt ${n} failed`);
        return Promise.resolve('done');
      },
      { policy: fast },
    );
    expect(value).toBe('done');
    expect(calls).toBe(3);
  });

  test('rejects with the last error once maxAttempts is used up', async () => {
    const seen: number[] = [];
    await expect(
      retry(
        (n) => {
          seen.push(n);
          return Promise.reject(new Error(`no ${n}`));
        },
        { policy: { ...fast, maxAttempts: 4 } },
      ),
    ).rejects.toThrow('no 4');
    expect(seen).toEqual([1, 2, 3, 4]);
  });

  test('an error that is not retryable ends it at once', async () => {
    let calls = 0;
    await expect(
      retry(
        () => {
          calls++;
          return Promise.reject(new TypeError('bug'));
        },
        { policy: fast, retryable: (err) => !(err instanceof TypeError) },
      ),
    ).rejects.toThrow('bug');
    expect(calls).toBe(1);
  });

  test('a failure returned as a value is retried with retryIf, and the last one returned', async () => {
    type Reply = { ok: true } | { ok: false; code: string };
    const replies: Reply[] = [
      { ok: false, code: 'timeout' },
      { ok: false, code: 'bad_request' },
    ];
    const last = await retry(() => Promise.resolve<Reply>(replies.shift() ?? { ok: true }), {
      policy: fast,
      retryIf: (r) => !r.ok && r.code === 'timeout',
    });
    expect(last).toEqual({ ok: false, code: 'bad_request' });
  });

  test('delay overrides the wait (a Retry-After) and undefined stops retrying', async () => {
    const waits: number[] = [];
    const asked = [5, 50_000];
    const r = await retry(() => Promise.resolve(asked.shift()), {
      policy: fast,
      retryIf: (v) => v !== undefined,
      delay: (o: Outcome<number | undefined>, backoffMs) => {
        const ms = o.ok ? o.value : undefined;
        return ms !== undefined && ms > 10_000 ? undefined : Math.max(ms ?? 0, backoffMs);
      },
      onRetry: ({ delayMs }) => waits.push(delayMs),
    });
    expect(waits).toEqual([5]);
    expect(r).toBe(50_000);
  });

  test('gives up once the next attempt would start past retryForMs', async () => {
    let clock = 0;
    let calls = 0;
    await expect(
      retry(
        () => {
          calls++;
          clock += 1_000;
          return Promise.reject(new Error('down'));
        },
        { policy: { initialMs: 0, maxMs: 0, retryForMs: 3_500 }, now: () => clock },
      ),
    ).rejects.toThrow('down');
    expect(calls).toBe(4);
  });

  test('an abort during the wait rejects with the signal reason', async () => {
    const stop = new AbortController();
    const started = Date.now();
    const run = retry(() => Promise.reject(new Error('down')), {
      policy: { initialMs: 60_000, maxMs: 60_000 },
      signal: stop.signal,
      onRetry: () => setTimeout(() => stop.abort(new Error('stopping')), 10),
    });
    await expect(run).rejects.toThrow('stopping');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  test('a wake ends the backoff wait: the next attempt runs at once, and the backoff goes on', async () => {
    const wakeup = new Wakeup();
    const waits: number[] = [];
    const started = Date.now();
    const run = retry((n) => (n < 3 ? Promise.reject(new Error('away')) : Promise.resolve(n)), {
      policy: { initialMs: 60_000, maxMs: 60_000 },
      wakeup,
      onRetry: ({ delayMs }) => {
        waits.push(delayMs);
        setTimeout(() => wakeup.wake(), 5);
      },
    });
    expect(await run).toBe(3);
    expect(waits).toEqual([60_000, 60_000]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  test('a wake while an attempt runs is not lost: the attempt after it does not wait', async () => {
    const wakeup = new Wakeup();
    const started = Date.now();
    const value = await retry(
      (n) => {
        if (n > 1) return Promise.resolve(n);
        wakeup.wake(); // the service came back while this attempt was on its way
        return Promise.reject(new Error('away'));
      },
      { policy: { initialMs: 60_000, maxMs: 60_000 }, wakeup },
    );
    expect(value).toBe(2);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

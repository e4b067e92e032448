import { describe, expect, test } from 'vitest';
import { retry, sleep, type Outcome } from './retry.js';

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
});

test('sleep resolves false as soon as its signal aborts, true when the time is up', async () => {
  expect(await sleep(1)).toBe(true);
  const stop = new AbortController();
  const slept = sleep(60_000, stop.signal);
  stop.abort();
  expect(await slept).toBe(false);
});

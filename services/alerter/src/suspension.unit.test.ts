import { createLogger, type AuthorityClient } from '@holdfast/runtime';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { createMetrics } from './metrics.js';
import type { StateStore } from './state-store.js';
import { SuspensionController } from './suspension.js';

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

test('a slow usage poll delays the next instead of queueing them, and no poll starts after stop()', async () => {
  let polls = 0;
  let answer = () => {};
  const authority = {
    usage: () => {
      polls++;
      const reply = { ok: true, value: { tenants: [] } };
      // The first poll hangs until answered; any later one answers at once.
      if (polls > 1) return Promise.resolve(reply);
      return new Promise((resolve) => (answer = () => resolve(reply)));
    },
  } as unknown as AuthorityClient;
  const s = new SuspensionController({
    authority,
    store: undefined as unknown as StateStore,
    logger: createLogger({ name: 'suspension-test', level: 'silent' }),
    metrics: createMetrics(new Registry()),
    pollMs: 100,
  });
  s.start();
  // Ten periods while the first poll hangs.
  await vi.advanceTimersByTimeAsync(1_000);
  expect(polls).toBe(1);
  const stopped = s.stop();
  answer();
  await stopped;
  await vi.advanceTimersByTimeAsync(1_000);
  expect(polls).toBe(1);
});

import { parseConfig } from '@holdfast/config';
import { createLogger } from '@holdfast/runtime';
import { Registry } from 'prom-client';
import { expect, vi } from 'vitest';
import { alerterNames } from '../src/index.js';
import { BurnMonitor } from '../src/burn-monitor.js';
import { BurnRecord } from '../src/burn-rate.js';
import { ConfigSource } from '../src/holdfast-config.js';
import { createMetrics } from '../src/metrics.js';
import { StateStore } from '../src/state-store.js';
import { WindowTracker, type Snapshot } from '../src/window-tracker.js';
import { alerterTest as test, cleanupAfterEach, settled, window } from './harness.js';

const cleanup = cleanupAfterEach();
const TENANT = 'team-burn';
const KEY = `burn.${TENANT}.month-tokens`;

test("a burn flush writes a window's record from this replica's last write (no read first), and still merges another replica's", async ({
  nc,
  iso,
}) => {
  const parsed = parseConfig({
    tenants: [{ id: TENANT, budgets: [{ window: 'month', limit: 1_000_000_000 }] }],
  });
  if (!parsed.ok) throw new Error(parsed.error.errors.join());
  const logger = createLogger({ name: 'burn-flush-test', level: 'silent' });
  const metrics = createMetrics(new Registry());
  const config = new ConfigSource({ config: parsed.value, logger, metrics });
  const store = await StateStore.open(nc, alerterNames(iso.names).stateBucket);
  cleanup(() => Promise.resolve(store.stop()));
  const other = await StateStore.open(nc, alerterNames(iso.names).stateBucket);
  const sink = { publish: () => Promise.resolve(), suspend: () => Promise.resolve() };
  const tracker = new WindowTracker({ store, sink, config, logger, metrics });
  const now = Date.now();
  const burn = new BurnMonitor({
    ...{ store, tracker, config, logger, metrics },
    lookbackMs: 600_000,
    flushMs: 60_000,
    now: () => now,
  });
  const reads = vi.spyOn(store, 'read');
  const writes = vi.spyOn(store, 'compareAndSet');
  const charge = (amount: number) => {
    const w = window(TENANT, 1_000_000_000, amount);
    const event = settled({ tenant: TENANT, time: new Date(now), charged: amount, windows: [w] });
    const s: Snapshot = {
      window: w,
      before: 0,
      position: { time: event.time, seq: 1 },
      cause: { eventId: event.id, time: event.time, org: TENANT, windows: [w] },
    };
    burn.add(event, [s]);
  };
  const total = async () => {
    const { value } = await other.read(KEY, BurnRecord, { buckets: [] }, { fresh: true });
    return value.buckets.reduce((sum, [, amount]) => sum + amount, 0);
  };

  charge(10);
  await burn.flush();
  expect(await total()).toBe(10);
  expect([reads.mock.calls.length, writes.mock.calls.length]).toEqual([1, 1]);
  // The next flushes write on top of what this replica wrote: one request each, no read.
  charge(20);
  await burn.flush();
  charge(30);
  await burn.flush();
  expect(await total()).toBe(60);
  expect([reads.mock.calls.length, writes.mock.calls.length]).toEqual([1, 3]);

  // Another replica merges its samples in between: this one's write loses the race once,
  // reads, and merges on top of both.
  const theirs = await other.read(KEY, BurnRecord, { buckets: [] }, { fresh: true });
  const bucket = theirs.value.buckets[0]![0];
  const merged = { buckets: [[bucket, theirs.value.buckets[0]![1] + 100]] };
  expect(await other.compareAndSet(KEY, merged, theirs.revision)).toBeDefined();
  charge(5);
  await burn.flush();
  expect(await total()).toBe(165);
  expect([reads.mock.calls.length, writes.mock.calls.length]).toEqual([2, 5]);
});

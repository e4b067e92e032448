import { parseConfig } from '@holdfast/config';
import type { SuspendRequest } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { infraTest as test } from '@holdfast/testkit';
import { Registry } from 'prom-client';
import { expect } from 'vitest';
import { ConfigSource } from '../src/holdfast-config.js';
import { alerterNames } from '../src/index.js';
import { createMetrics } from '../src/metrics.js';
import { StateStore } from '../src/state-store.js';
import { WindowTracker, type Snapshot } from '../src/window-tracker.js';
import { cleanupAfterEach, removeAlerterState, window } from './harness.js';

const cleanup = cleanupAfterEach();

/** A sink that fails its first `failures` publishes, like a NATS outage or a crash mid-way. */
function flakySink(failures: number) {
  const published: Array<Record<string, unknown>> = [];
  const suspended: SuspendRequest[] = [];
  let left = failures;
  return {
    published,
    suspended,
    sink: {
      publish: (e: Record<string, unknown>) => {
        if (left-- > 0) return Promise.reject(new Error('publish failed'));
        published.push(e);
        return Promise.resolve();
      },
      suspend: (r: SuspendRequest) => {
        suspended.push(r);
        return Promise.resolve();
      },
    },
  };
}

async function tracker(
  nc: Parameters<typeof StateStore.open>[0],
  bucket: string,
  sink: ReturnType<typeof flakySink>['sink'],
) {
  const parsed = parseConfig({
    tenants: [
      { id: 'team-o', budgets: [{ window: 'month', limit: 1_000, soft: [0.8], grace: 2_500 }] },
    ],
  });
  if (!parsed.ok) throw new Error(parsed.error.errors.join());
  const logger = createLogger({ name: 'tracker-test', level: 'silent' });
  return new WindowTracker({
    store: await StateStore.open(nc, bucket),
    sink,
    config: new ConfigSource({ config: parsed.value, logger }),
    logger,
    metrics: createMetrics(new Registry()),
  });
}

const snap = (
  before: number,
  used: number,
  seq: number,
  time = new Date(Date.UTC(2026, 11, 1, 0, 0, 0, seq)),
): Snapshot => ({
  window: window('team-o', 1_000, used),
  before,
  position: { time: time.toISOString(), seq },
  cause: {
    eventId: `e${seq}`,
    time: time.toISOString(),
    org: 'team-o',
    windows: [window('team-o', 1_000, used)],
  },
});

test('a crossing whose publish failed after its state was written is published by the next touch, once', async ({
  nc,
  iso,
}) => {
  cleanup(() => removeAlerterState(nc, iso.names));
  const bucket = alerterNames(iso.names).stateBucket;
  const flaky = flakySink(1);
  const a = await tracker(nc, bucket, flaky.sink);
  await expect(a.observe(snap(0, 850, 1))).rejects.toThrow('publish failed');
  expect(flaky.published).toEqual([]);

  // Another replica (same store) handles the redelivered event: the pending crossing goes out
  // with the id fixed when it was recorded, and the crossing is not evaluated twice.
  const b = await tracker(nc, bucket, flaky.sink);
  await b.observe(snap(0, 850, 1));
  await b.observe(snap(850, 900, 2));
  expect(flaky.published).toHaveLength(1);
  expect(flaky.published[0]).toMatchObject({
    type: 'threshold.crossed',
    threshold: 0.8,
    causeEventId: 'e1',
  });

  // An event that stays below changes nothing; the hard limit suspends once with the grace,
  // also when its event is handled again by the other replica.
  await b.observe(snap(0, 100, 0));
  await b.observe(snap(900, 1_000, 3));
  await a.observe(snap(900, 1_000, 3));
  await a.observe(snap(1_000, 1_000, 4));
  expect(flaky.published).toHaveLength(1);
  expect(flaky.suspended).toEqual([
    expect.objectContaining({
      tenant: 'team-o',
      budget: 'month-tokens',
      by: 'alerter',
      graceMs: 2_500,
    }),
  ]);
});

import { parseConfig } from '@holdfast/config';
import type { SuspendRequest } from '@holdfast/events';
import { createLogger } from '@holdfast/runtime';
import { type Isolation } from '@holdfast/testkit';
import { Kvm } from '@nats-io/kv';
import { Registry } from 'prom-client';
import { expect } from 'vitest';
import { ConfigSource } from '../src/holdfast-config.js';
import { alerterNames } from '../src/index.js';
import { createMetrics } from '../src/metrics.js';
import { StateStore } from '../src/state-store.js';
import { WindowTracker, type Snapshot } from '../src/window-tracker.js';
import { cleanupAfterEach, mirroredStore, window, alerterTest as test } from './harness.js';

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
  store?: StateStore,
) {
  const parsed = parseConfig({
    tenants: [
      { id: 'team-o', budgets: [{ window: 'month', limit: 1_000, soft: [0.8], grace: 2_500 }] },
    ],
  });
  if (!parsed.ok) throw new Error(parsed.error.errors.join());
  const logger = createLogger({ name: 'tracker-test', level: 'silent' });
  return new WindowTracker({
    store: store ?? (await StateStore.open(nc, bucket)),
    sink,
    config: new ConfigSource({ config: parsed.value, logger }),
    logger,
    metrics: createMetrics(new Registry()),
  });
}

/**
 * The test's state bucket and a sink that fails its first `failures` publishes; `replica()`
 * starts a tracker on both (one alerter replica each).
 */
function onBucket(
  nc: Parameters<typeof StateStore.open>[0],
  names: Isolation['names'],
  failures = 0,
) {
  const bucket = alerterNames(names).stateBucket;
  const sink = flakySink(failures);
  return { bucket, sink, replica: () => tracker(nc, bucket, sink.sink) };
}

const snap = (
  before: number,
  used: number,
  seq: number,
  limit = 1_000,
  time = new Date(Date.UTC(2026, 11, 1, 0, 0, 0, seq)),
): Snapshot => ({
  window: window('team-o', limit, used),
  before,
  position: { time: time.toISOString(), seq },
  cause: {
    eventId: `e${seq}`,
    time: time.toISOString(),
    org: 'team-o',
    windows: [window('team-o', limit, used)],
  },
});

test('a crossing whose publish failed after its state was written is published by the next touch, once', async ({
  nc,
  iso,
}) => {
  const { sink: flaky, replica } = onBucket(nc, iso.names, 1);
  const a = await replica();
  await expect(a.observe(snap(0, 850, 1))).rejects.toThrow('publish failed');
  expect(flaky.published).toEqual([]);

  // Another replica (same store) handles the redelivered event: the pending crossing goes out
  // with the id fixed when it was recorded, and the crossing is not evaluated twice.
  const b = await replica();
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

test('standing levels: none soft at a first look; a lower limit suspends once; a later standing covers an earlier crossing', async ({
  nc,
  iso,
}) => {
  const { sink, replica } = onBucket(nc, iso.names);
  const a = await replica();
  const b = await replica();

  // The first event the alerter sees shows 85% before and after: no soft level stands at a
  // first look (an earlier event may still come and cross it), 80% fires for the next event
  // that crosses it. The hard level does stand at a first look (below, after a lower limit).
  await a.observe(snap(850, 860, 10));
  await b.observe(snap(850, 860, 10));
  await b.observe(snap(700, 900, 11));
  await a.observe(snap(700, 900, 11));
  expect(sink.published).toMatchObject([{ threshold: 0.8, causeEventId: 'e11' }]);

  // The limit lowered under what was spent (900 of 1,000 to 880): the hard level was never
  // reached under the old limit, so it stands at the first event under the new one and
  // suspends once; 80% was reached already and does not fire again.
  await a.observe(snap(900, 905, 12, 880));
  await b.observe(snap(905, 910, 13, 880));
  expect(sink.published).toHaveLength(1);
  expect(sink.suspended).toHaveLength(1);
  // An event from between the last one under the old limit and the standing one, handled
  // after them, that crossed 100% under the new limit: what the standing level reported.
  await a.observe(snap(870, 880, 50, 880, new Date(Date.UTC(2026, 11, 1, 0, 0, 0, 11))));
  expect(sink.suspended).toHaveLength(1);

  // A refund (910 -> 500) handled after the climb back over 80% (500 -> 850): the crossing
  // fires once, also when handled again.
  await b.observe(snap(500, 850, 15, 880));
  await a.observe(snap(910, 500, 14, 880));
  await a.observe(snap(500, 850, 15, 880));
  expect(sink.published.map((e) => e.causeEventId)).toEqual(['e11', 'e15']);
});

test('a record from before crossings were per event keeps its levels: nothing stands', async ({
  nc,
  iso,
}) => {
  const { sink, bucket, replica } = onBucket(nc, iso.names);
  const a = await replica();
  const kv = await new Kvm(nc).open(bucket);
  await kv.put(
    'win.team-o.month-tokens',
    JSON.stringify({
      at: { time: '2026-12-01T00:00:00.001Z', seq: 1 },
      fired: [0.8],
      projectedPeriod: 7,
      pending: [],
    }),
  );
  await a.observe(snap(850, 860, 2));
  await a.observe(snap(700, 820, 3));
  expect(sink.published).toMatchObject([{ threshold: 0.8, causeEventId: 'e3' }]);
  const rec = (await kv.get('win.team-o.month-tokens'))?.json<Record<string, unknown>>();
  expect(rec).toMatchObject({ projectedPeriod: 7, known: { levels: [0.8, 1], limit: 1_000 } });
  expect(rec).not.toHaveProperty('fired');
});

test('a first look at a window already at its hard limit suspends, once, whichever event comes first', async ({
  nc,
  iso,
}) => {
  const { sink, replica } = onBucket(nc, iso.names);
  const a = await replica();
  const b = await replica();
  // 1,040 -> 1,050 handled first, then the event before it that crossed 100% (990 -> 1,040).
  await a.observe(snap(1_040, 1_050, 21));
  await b.observe(snap(990, 1_040, 20));
  expect(sink.suspended).toHaveLength(1);
  expect(sink.published).toEqual([]);
});

/** A tracker whose store keeps the mirror of the windows, as the alerter's does. */
async function mirrored(nc: Parameters<typeof StateStore.open>[0], names: Isolation['names']) {
  const { store, bucket } = await mirroredStore(nc, names, cleanup);
  const sink = flakySink(0);
  const kv = await new Kvm(nc).open(bucket);
  return { sink, kv, tracker: await tracker(nc, bucket, sink.sink, store) };
}

test('a snapshot that changes nothing is decided at once from the state mirror: no promise, nothing written', async ({
  nc,
  iso,
}) => {
  const { sink, kv, tracker: a } = await mirrored(nc, iso.names);
  // The first look writes the window's known levels (a round trip); the mirror then holds them.
  await a.observe(snap(100, 200, 1));
  const revision = (await kv.get('win.team-o.month-tokens'))?.revision;
  expect(revision).toBeGreaterThan(0);
  // Below every level, and a window of limit 0 (no budget): decided in the same turn.
  expect(a.observe(snap(200, 300, 2))).toBeUndefined();
  expect(a.observe(snap(0, 10, 3, 0))).toBeUndefined();
  // A crossing still goes through the store, and is published once.
  const crossing = a.observe(snap(700, 850, 4));
  expect(crossing).toBeInstanceOf(Promise);
  await crossing;
  expect(sink.published).toMatchObject([{ threshold: 0.8, causeEventId: 'e4' }]);
  expect((await kv.get('win.team-o.month-tokens'))?.revision).toBeGreaterThan(revision!);
});

import type { ThresholdCrossed } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { alerterNames, type DeadLetterRecord, type DeliveryLogRecord } from '../src/index.js';
import {
  publishEvents,
  quiescent,
  readEvents,
  readStream,
  settled,
  startReplica,
  window,
  cleanupAfterEach,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

const TEAMS = ['team-b', 'team-c', 'team-d'];

function configFor(url: string) {
  return {
    tenants: TEAMS.map((id) => ({ id, budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }] })),
    webhooks: [{ id: 'finance', url, secretEnv: 'HOOK_SECRET', events: ['threshold.crossed'] }],
  };
}

/** One settlement per team that takes it to 90%: three crossings of 0.8. */
const crossingEvents = () =>
  TEAMS.map((tenant) =>
    settled({ tenant, time: new Date(), charged: 900, windows: [window(tenant, 1_000, 900)] }),
  );

test('a receiver down for 30 s gets every webhook once when it is back, same webhook-id', async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  await receiver.down();
  const downAt = Date.now();
  for (let i = 0; i < 2; i++) {
    const r = await startReplica({
      natsUrl,
      names: iso.names,
      config: configFor(receiver.url),
      settings: { retry: { initialMs: 500, maxMs: 4_000, retryForMs: 600_000 } },
    });
    cleanup(() => r.stop());
  }
  const log: DeliveryLogRecord[] = [];
  const sub = nc.subscribe(`${alerterNames(iso.names).logSubjectPrefix}.>`, {
    callback: (_err, m) => void log.push(m.json<DeliveryLogRecord>()),
  });
  cleanup(() => Promise.resolve(sub.unsubscribe()));

  await publishEvents(nc, iso.names, crossingEvents());
  // The outage: every job keeps failing (connection refused) for 30 s.
  await waitFor(
    () =>
      Date.now() - downAt >= 30_000 && log.filter((r) => r.outcome === 'failed').length >= 3 * 5,
    { timeoutMs: 60_000, intervalMs: 250, what: '30 s of failed attempts' },
  );
  const failedDuringOutage = log.filter((r) => r.outcome === 'failed');
  expect(failedDuringOutage.every((r) => r.status === null && r.nextAttemptAt !== null)).toBe(true);

  const upAt = Date.now();
  await receiver.up();
  await waitFor(async () => receiver.ids().size === 3 && (await quiescent(nc, iso.names)), {
    timeoutMs: 30_000,
    what: 'three deliveries after the outage',
  });

  const crossings = (await readEvents(nc, iso.names)).filter(
    (e): e is ThresholdCrossed => e.type === 'threshold.crossed',
  );
  expect(crossings).toHaveLength(3);
  // Each webhook-id (= the event id) arrived once, though each was attempted many times.
  expect(receiver.received.map((r) => r.id).sort()).toEqual(crossings.map((c) => c.id).sort());
  const delivered = log.filter((r) => r.outcome === 'delivered');
  expect(delivered).toHaveLength(3);
  for (const d of delivered) {
    expect(d.attempt).toBeGreaterThan(5);
    expect(
      log.filter((r) => r.deliveryId === d.deliveryId).every((r) => r.webhookId === 'finance'),
    ).toBe(true);
  }
  const afterUp = receiver.received.map((r) => r.receivedAt - upAt);
  console.log(
    `[alerter] outage: ${failedDuringOutage.length} failed attempts in ${Math.round((upAt - downAt) / 1_000)} s; ` +
      `attempts per delivery ${delivered.map((d) => d.attempt).join(', ')}; delivered ${afterUp.join(', ')} ms after the receiver came back`,
  );
});

test('a delivery still failing after retryFor is dead-lettered with its job, and leaves the queue', async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  receiver.respondWith(503);
  const r = await startReplica({
    natsUrl,
    names: iso.names,
    config: configFor(receiver.url),
    settings: { retry: { initialMs: 100, maxMs: 400, retryForMs: 1_500 } },
  });
  cleanup(() => r.stop());
  const [first] = crossingEvents();
  await publishEvents(nc, iso.names, [first!]);

  const own = alerterNames(iso.names);
  const dead = await waitFor(
    async () => {
      const d = await readStream<DeadLetterRecord>(nc, own.logStream, `${own.deadSubjectPrefix}.`);
      return d.length > 0 && (await quiescent(nc, iso.names)) ? d : undefined;
    },
    { timeoutMs: 20_000, what: 'a dead-letter record' },
  );
  expect(dead).toHaveLength(1);
  expect(dead[0]).toMatchObject({
    outcome: 'dead_lettered',
    reason: 'retries exhausted',
    status: 503,
    webhookId: 'finance',
  });
  expect(dead[0]!.job).toMatchObject({
    webhookId: 'finance',
    event: { type: 'threshold.crossed', tenant: 'team-b' },
  });
  expect(receiver.received).toEqual([]);
  const metrics = await r.registry
    .getSingleMetric('holdfast_alerter_webhook_deliveries_total')!
    .get();
  const byOutcome = Object.fromEntries(metrics.values.map((v) => [v.labels.outcome, v.value]));
  expect(byOutcome.dead_lettered).toBe(1);
  expect(byOutcome.failed).toBeGreaterThanOrEqual(2);
});

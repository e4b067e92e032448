import type { ThresholdCrossed } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  percentiles,
  publishEvents,
  quiescent,
  readEvents,
  settled,
  startReplica,
  window,
  type Replica,
  cleanupAfterEach,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

/**
 * The authority's view of one team under an org: every settle adds to both levels' windows.
 * Events are built in state order with increasing times, then published by 8 concurrent
 * publishers, so the stream (and the two replicas) see them out of order.
 */
function ledger(teamLimit: number, orgLimit: number) {
  let used = 0;
  let t = Date.now();
  return (delta: number, charged = delta) => {
    used += delta;
    t += 1;
    return settled({
      tenant: 'team-a',
      org: 'acme',
      time: new Date(t),
      charged,
      windows: [window('team-a', teamLimit, used), window('acme', orgLimit, used)],
    });
  };
}

test('two replicas fire each threshold once per upward crossing under concurrent settlements', async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  const config = {
    tenants: [
      { id: 'acme', budgets: [{ window: 'month', limit: 12_000, soft: [0.8] }] },
      {
        id: 'team-a',
        parent: 'acme',
        budgets: [{ window: 'month', limit: 10_000, soft: [0.5, 0.8, 0.95], enforce: false }],
      },
    ],
    webhooks: [
      { id: 'finance', url: receiver.url, secretEnv: 'HOOK_SECRET', events: ['threshold.crossed'] },
    ],
    alerts: { suspendAtHardLimit: false },
  };
  const replicas: Replica[] = [];
  for (let i = 0; i < 2; i++) {
    const r = await startReplica({ natsUrl, names: iso.names, config });
    replicas.push(r);
    cleanup(() => r.stop());
  }

  const next = ledger(10_000, 12_000);
  // Up to 100% in 200 settlements of 50 tokens, then usage ages out down to 40%, then back to 85%.
  const up = Array.from({ length: 200 }, () => next(50));
  const drop = [next(-6_000, 0)];
  const again = Array.from({ length: 90 }, () => next(50));
  await publishEvents(nc, iso.names, up, 8);
  await publishEvents(nc, iso.names, drop);
  await publishEvents(nc, iso.names, again, 8);

  const crossings = await waitFor(
    async () => {
      const events = await readEvents(nc, iso.names);
      const c = events.filter((e): e is ThresholdCrossed => e.type === 'threshold.crossed');
      return c.length >= 6 && receiver.ids().size >= 6 && (await quiescent(nc, iso.names))
        ? c
        : undefined;
    },
    { timeoutMs: 30_000, what: 'six crossings delivered and everything handled' },
  );
  const summary = crossings.map((c) => `${c.level}@${c.threshold}`).sort();
  expect(summary).toEqual([
    'acme@0.8',
    'team-a@0.5',
    'team-a@0.5',
    'team-a@0.8',
    'team-a@0.8',
    'team-a@0.95',
  ]);
  // Every crossing reports the window that showed it.
  for (const c of crossings) expect(c.utilisation).toBeGreaterThanOrEqual(c.threshold);

  // Each crossing reached the receiver exactly once, signed (verified by standardwebhooks).
  expect(receiver.rejected).toEqual([]);
  expect(receiver.received.map((r) => r.id).sort()).toEqual(crossings.map((c) => c.id).sort());
  expect(receiver.received.every((r) => r.payload.type === 'threshold.crossed')).toBe(true);

  // Both replicas did part of the work.
  for (const r of replicas) {
    const handled = await r.registry.getSingleMetric('holdfast_alerter_events_total')!.get();
    expect(handled.values.reduce((sum, v) => sum + v.value, 0)).toBeGreaterThan(0);
  }

  const latency = percentiles(
    receiver.received.map((r) => r.receivedAt - Date.parse(r.payload.timestamp)),
  );
  console.log(
    `[alerter] crossing -> webhook received, ms (2 replicas, 291 events): ${JSON.stringify(latency)}`,
  );
});

import type { ThresholdCrossed } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { jetstream } from '@nats-io/jetstream';
import { expect } from 'vitest';
import {
  cleanupAfterEach,
  publishEvents,
  quiescent,
  readEvents,
  settled,
  startReplica,
  window,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

test('every crossing fires once whatever order two replicas handle the events in: a dip handled after the climb back', async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  const config = {
    tenants: [
      { id: 'acme-o', budgets: [{ window: 'month', limit: 2_000, soft: [0.4] }] },
      {
        id: 'team-o',
        parent: 'acme-o',
        budgets: [{ window: 'month', limit: 1_000, soft: [0.5, 0.8] }],
      },
    ],
    webhooks: [
      { id: 'finance', url: receiver.url, secretEnv: 'HOOK_SECRET', events: ['threshold.crossed'] },
    ],
    alerts: { suspendAtHardLimit: false },
  };
  for (let i = 0; i < 2; i++) {
    const r = await startReplica({ natsUrl, names: iso.names, config });
    cleanup(() => r.stop());
  }

  // The authority's order: up to 85% (crossing 50% and 80%; the org's 40% at 850 of 2,000),
  // usage ages out to 30% (an event that charges nothing shows it), then back up to 90% (the
  // same three again), then 95% (nothing new).
  let used = 0;
  let t = Date.now();
  const next = (to: number, charged = to - used) => {
    used = to;
    t += 1;
    return settled({
      tenant: 'team-o',
      org: 'acme-o',
      time: new Date(t),
      charged,
      windows: [window('team-o', 1_000, used), window('acme-o', 2_000, used)],
    });
  };
  const [e1, e2, dip, e4, e5] = [next(600), next(850), next(300, 0), next(900), next(950)];

  // Handled in an adversarial order, each once everything before it was handled: last to
  // first (the window's first event the alerter sees is already above both levels, the climb
  // back before the dip before it), then e2 redelivered (the same event, so the same
  // crossings, recorded once).
  const handled = () =>
    waitFor(() => quiescent(nc, iso.names), { timeoutMs: 15_000, what: 'events handled' });
  for (const batch of [[e5], [e4], [dip], [e2], [e1]]) {
    await publishEvents(nc, iso.names, batch);
    await handled();
  }
  await jetstream(nc).publish(`${iso.names.eventsPrefix}.team-o.${e2.type}`, JSON.stringify(e2), {
    msgID: `${e2.id}.again`,
  });
  await handled();

  const crossings = await waitFor(
    async () => {
      const c = (await readEvents(nc, iso.names)).filter(
        (e): e is ThresholdCrossed => e.type === 'threshold.crossed',
      );
      return c.length >= 6 && receiver.ids().size >= 6 && (await quiescent(nc, iso.names))
        ? c
        : undefined;
    },
    { timeoutMs: 15_000, what: 'six crossings delivered' },
  );
  const summary = crossings.map((c) => `${c.level}@${c.threshold}<-${c.causeEventId}`).sort();
  expect(summary).toEqual(
    [
      `acme-o@0.4<-${e2.id}`,
      `acme-o@0.4<-${e4.id}`,
      `team-o@0.5<-${e1.id}`,
      `team-o@0.5<-${e4.id}`,
      `team-o@0.8<-${e2.id}`,
      `team-o@0.8<-${e4.id}`,
    ].sort(),
  );
  for (const c of crossings) expect(c.utilisation).toBeGreaterThanOrEqual(c.threshold);
  expect(receiver.received.map((r) => r.id).sort()).toEqual(crossings.map((c) => c.id).sort());
});

import { waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { alerterNames, DEFAULT_SETTINGS, type DeliveryLogRecord } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  SECRET,
  settled,
  startReplica,
  window,
  alerterTest as test,
} from './harness.js';
import { Receiver } from './receiver.js';

const cleanup = cleanupAfterEach();

/** More failed jobs of one webhook than the deliverer's consumer allowed unacked (10,000). */
const BACKLOG = 10_200;

/**
 * Found by an audit of hostile load on 2026-12-06: every webhook's jobs shared one durable
 * consumer (`deliverer`, max_ack_pending 10,000), and a failed job is nak'd with its backoff and
 * stays unacked for its whole retry period (6 h). Once one webhook held 10,000 failed jobs (a
 * busy event type such as `reservation.settled`, a receiver that answers 500), the consumer
 * handed out nothing more, and every other webhook's alerts waited until that backlog drained
 * (the other team's alert had not come 15 s on). Now each webhook has a consumer of its own.
 */
test("a webhook failing every job of a busy event type keeps its backlog to itself: another webhook's alert still goes out within 5 s", async ({
  nc,
  natsUrl,
  iso,
}) => {
  // `usage` takes every settlement (any event type may be subscribed) and answers 500 to all;
  // `pager` takes threshold crossings and works.
  const usage = await Receiver.start(SECRET);
  usage.respondWith(500);
  const pager = await Receiver.start(SECRET);
  cleanup(() => usage.stop());
  cleanup(() => pager.stop());
  const hook = (id: string, url: string, events: string[]) => ({
    id,
    url,
    secretEnv: 'HOOK_SECRET',
    events,
  });
  const r = await startReplica({
    natsUrl,
    names: iso.names,
    config: {
      tenants: [
        { id: 'team-busy', budgets: [{ window: 'month', limit: 1e12 }] },
        { id: 'team-q', budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }] },
      ],
      webhooks: [
        hook('usage', usage.url, ['reservation.settled']),
        hook('pager', pager.url, ['threshold.crossed']),
      ],
    },
    // A failed job is retried a minute on (the default schedule waits longer still).
    settings: { retry: { initialMs: 60_000, maxMs: 600_000, retryForMs: 21_600_000 } },
  });
  cleanup(() => r.stop());
  let failed = 0;
  const sub = nc.subscribe(`${alerterNames(iso.names).logSubjectPrefix}.usage`, {
    callback: (_err, m) => {
      if (m.json<DeliveryLogRecord>().outcome === 'failed') failed++;
    },
  });
  cleanup(() => Promise.resolve(sub.unsubscribe()));

  // One busy team's small calls: a settlement each, no window moved (nothing to cross).
  const busy = Array.from({ length: BACKLOG }, () =>
    settled({ tenant: 'team-busy', time: new Date(), charged: 1, windows: [] }),
  );
  await publishEvents(nc, iso.names, busy, 16);
  await waitFor(() => failed >= 10_000, {
    timeoutMs: 90_000,
    intervalMs: 250,
    what: "10,000 failed attempts of the 'usage' webhook",
  });

  // Every busy event handled (its job queued): what is measured below is the failed jobs'
  // backlog in the deliverer, not the events consumer still working through the busy team's
  // settlements on a loaded box (the crossing would wait behind them in the stream: a
  // throughput, not this isolation; seen 15 s+ at load, stop 45's commit as well).
  const jsm = await jetstreamManager(nc);
  await waitFor(
    async () => {
      const c = await jsm.consumers.info(iso.names.eventsStream, DEFAULT_SETTINGS.consumer);
      return c.num_pending === 0 && c.num_ack_pending === 0;
    },
    { timeoutMs: 90_000, intervalMs: 250, what: 'every busy event handled by the alerter' },
  );

  // Another team crosses 80%: its alert is due within 5 s of the crossing, of the alerter's
  // time: the alerter runs in this process, so what the box took from it while the alert was
  // on its way (timers that fired late) is added to the bound.
  const stalled = stalls();
  const sent = Date.now();
  await publishEvents(nc, iso.names, [
    settled({
      tenant: 'team-q',
      time: new Date(),
      charged: 900,
      windows: [window('team-q', 1_000, 900)],
    }),
  ]);
  const arrived = await waitFor(() => pager.received[0], {
    timeoutMs: 15_000,
    what: "the pager's alert of team-q",
  }).catch(() => undefined);
  const stalledMs = stalled();
  const own = alerterNames(iso.names);
  const consumers = await jsm.consumers.list(own.webhookStream).next();
  const pending = consumers.map(
    (c) => `${c.name}: ${c.num_ack_pending} unacked, ${c.num_pending} waiting`,
  );
  console.log(
    `[backlog] ${failed} failed 'usage' attempts; pager alert ${arrived ? `${arrived.receivedAt - sent} ms` : 'not'} after the crossing (this process stalled ${stalledMs} ms meanwhile); ${pending.join('; ')}`,
  );
  expect(arrived, "the pager's alert stalled behind the other webhook's failed jobs").toBeDefined();
  expect(arrived!.receivedAt - sent).toBeLessThan(5_000 + stalledMs);
});

/**
 * How long this process could not run its timers, from now until the returned function is
 * called: a 20 ms tick's lateness, summed. On a quiet box a few ms; at a load of 13-21 on 2
 * cores the alert above took 5,694 ms.
 */
function stalls(tickMs = 20): () => number {
  let stalled = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    stalled += Math.max(0, now - last - tickMs);
    last = now;
  }, tickMs);
  return () => {
    clearInterval(timer);
    return Math.round(stalled);
  };
}

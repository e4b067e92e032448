import { tcpProxy, waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { alerterNames, DEFAULT_SETTINGS } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  settled,
  startReplica,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

const EVENTS = 300;
const ROUND_TRIP_MS = 100;

/**
 * webhook.backlog on a loaded box: a busy team's 10,200 settlements, each wanted by a webhook,
 * took the alerter 15 s+, and another team's crossing behind them in the stream waited that
 * long. Each event's job was queued inside its org's serial handler, so one org's events
 * waited for each other's JetStream publish: one round trip an event. With every round trip
 * held to 100 ms, one at a time is 30 s for 300 events at the least.
 */
test("a busy org's events wanted by a webhook queue their jobs side by side, not one round trip at a time", async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  const proxy = await tcpProxy(natsUrl, { latencyMs: ROUND_TRIP_MS });
  cleanup(() => proxy.close());
  const r = await startReplica({
    natsUrl: proxy.url,
    names: iso.names,
    config: {
      tenants: [{ id: 'team-busy', budgets: [{ window: 'month', limit: 1e12 }] }],
      webhooks: [
        {
          id: 'usage',
          url: receiver.url,
          secretEnv: 'HOOK_SECRET',
          events: ['reservation.settled'],
        },
      ],
    },
  });
  cleanup(() => r.stop());
  const busy = Array.from({ length: EVENTS }, () =>
    settled({ tenant: 'team-busy', time: new Date(), charged: 1, windows: [] }),
  );
  const jsm = await jetstreamManager(nc);
  const started = performance.now();
  await publishEvents(nc, iso.names, busy, 16);
  await waitFor(
    async () => {
      const c = await jsm.consumers.info(iso.names.eventsStream, DEFAULT_SETTINGS.consumer);
      return c.num_pending === 0 && c.num_ack_pending === 0;
    },
    { timeoutMs: 60_000, intervalMs: 50, what: 'every busy event handled' },
  );
  const tookMs = performance.now() - started;
  console.log(`[enqueue] ${EVENTS} events handled in ${Math.round(tookMs)} ms`);
  const own = alerterNames(iso.names);
  const queued = await jsm.streams.info(own.webhookStream, {
    subjects_filter: `${own.webhookSubjectPrefix}.>`,
  });
  expect(queued.state.subjects).toEqual({ [`${own.webhookSubjectPrefix}.usage`]: EVENTS });
  expect(tookMs).toBeLessThan((EVENTS * ROUND_TRIP_MS) / 2);
});

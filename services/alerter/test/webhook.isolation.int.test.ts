import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { infraTest as test, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { alerterNames, type DeliveryLogRecord } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  removeAlerterState,
  SECRET,
  settled,
  startReplica,
  window,
} from './harness.js';
import { Receiver } from './receiver.js';

const cleanup = cleanupAfterEach();

const TEAMS = Array.from({ length: 12 }, (_, i) => `team-${i}`);

/** A receiver that takes each request and never answers: a hung endpoint. */
async function hangingReceiver(): Promise<{
  url: string;
  peak: () => number;
  stop: () => Promise<void>;
}> {
  let open = 0;
  let peak = 0;
  const server: Server = createServer((req) => {
    open++;
    peak = Math.max(peak, open);
    req.on('close', () => open--);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    peak: () => peak,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test("a webhook that hangs holds at most its own share of the deliverer: every other webhook's alerts go out at once", async ({
  nc,
  natsUrl,
  iso,
}) => {
  const hung = await hangingReceiver();
  const fast = await Receiver.start(SECRET);
  cleanup(() => hung.stop());
  cleanup(() => fast.stop());
  cleanup(() => removeAlerterState(nc, iso.names));
  const hook = (id: string, url: string) => ({
    id,
    url,
    secretEnv: 'HOOK_SECRET',
    events: ['threshold.crossed'],
  });
  const r = await startReplica({
    natsUrl,
    names: iso.names,
    config: {
      tenants: TEAMS.map((id) => ({
        id,
        budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }],
      })),
      // The hung webhook first: its jobs are queued ahead of the other's.
      webhooks: [hook('hung', hung.url), hook('pager', fast.url)],
    },
    // 4 attempts at once, 2 of them at most for one webhook; an attempt gives up after 2 s.
    settings: {
      webhookConcurrency: 4,
      webhookConcurrencyPerHook: 2,
      webhookTimeoutMs: 2_000,
      retry: { initialMs: 60_000, maxMs: 60_000, retryForMs: 600_000 },
    },
  });
  cleanup(() => r.stop());
  const log: DeliveryLogRecord[] = [];
  const sub = nc.subscribe(`${alerterNames(iso.names).logSubjectPrefix}.>`, {
    callback: (_err, m) => void log.push(m.json<DeliveryLogRecord>()),
  });
  cleanup(() => Promise.resolve(sub.unsubscribe()));

  const sent = Date.now();
  await publishEvents(
    nc,
    iso.names,
    TEAMS.map((tenant) =>
      settled({ tenant, time: new Date(), charged: 900, windows: [window(tenant, 1_000, 900)] }),
    ),
  );
  // Before, the hung webhook's 12 jobs took all 4 slots for 2 s at a time, and the other
  // webhook's 12 went out only between them (the last 6.4 s after its event in a run).
  await waitFor(() => fast.ids().size === TEAMS.length, {
    timeoutMs: 20_000,
    what: "the other webhook's 12 alerts",
  });
  const last = Math.max(...fast.received.map((x) => x.receivedAt)) - sent;
  console.log(`[isolation] the other webhook's 12 alerts within ${last} ms of their events`);
  expect(last).toBeLessThan(2_500);
  // The hung webhook had at most its 2 attempts open at once, and each of its jobs is tried.
  await waitFor(
    () => log.filter((x) => x.webhookId === 'hung' && x.outcome === 'failed').length >= 12,
    { timeoutMs: 30_000, what: "the hung webhook's 12 attempts" },
  );
  expect(hung.peak()).toBeLessThanOrEqual(2);
  expect(log.filter((x) => x.webhookId === 'pager' && x.outcome === 'delivered')).toHaveLength(12);
});

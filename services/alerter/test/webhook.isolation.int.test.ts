import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { alerterNames, type DeliveryLogRecord } from '../src/index.js';
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

const TEAMS = Array.from({ length: 12 }, (_, i) => `team-${i}`);

const hook = (id: string, url: string) => ({
  id,
  url,
  secretEnv: 'HOOK_SECRET',
  events: ['threshold.crossed'],
});

/** 12 teams at 80%, and two webhooks: `hung` (queued first) and `pager`. */
const configFor = (hungUrl: string, pagerUrl: string) => ({
  tenants: TEAMS.map((id) => ({ id, budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }] })),
  webhooks: [hook('hung', hungUrl), hook('pager', pagerUrl)],
});

/** 4 attempts at once, 2 at most for one webhook, 2 s each; a failed one retried a minute on. */
const SETTINGS = {
  webhookConcurrency: 4,
  webhookConcurrencyPerHook: 2,
  webhookTimeoutMs: 2_000,
  retry: { initialMs: 60_000, maxMs: 60_000, retryForMs: 600_000 },
};

/** How long an attempt at the hung webhook waits (the isolation test): the others' margin. */
const HUNG_MS = 3_000;

/** One settlement per team that takes it to 90%: a crossing of 0.8 each. */
const crossings = () =>
  TEAMS.map((tenant) =>
    settled({ tenant, time: new Date(), charged: 900, windows: [window(tenant, 1_000, 900)] }),
  );

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

/** A hung receiver and a working one, stopped after the test. */
async function receivers() {
  const hung = await hangingReceiver();
  const fast = await Receiver.start(SECRET);
  cleanup(() => hung.stop());
  cleanup(() => fast.stop());
  return { hung, fast };
}

test("a webhook that hangs holds at most its own share of the deliverer: every other webhook's alerts go out at once", async ({
  nc,
  natsUrl,
  iso,
}) => {
  const { hung, fast } = await receivers();
  const r = await startReplica({
    natsUrl,
    names: iso.names,
    config: configFor(hung.url, fast.url),
    // 4 attempts at once, 2 of them at most for one webhook; an attempt gives up after 3 s.
    settings: { ...SETTINGS, webhookTimeoutMs: HUNG_MS },
  });
  cleanup(() => r.stop());
  const log: DeliveryLogRecord[] = [];
  const sub = nc.subscribe(`${alerterNames(iso.names).logSubjectPrefix}.>`, {
    callback: (_err, m) => void log.push(m.json<DeliveryLogRecord>()),
  });
  cleanup(() => Promise.resolve(sub.unsubscribe()));

  const sent = Date.now();
  await publishEvents(nc, iso.names, crossings());
  // Before, the hung webhook's 12 jobs took all 4 slots for 2 s at a time, and the other
  // webhook's 12 went out only between them (the last 6.4 s after its event in a run).
  await waitFor(() => fast.ids().size === TEAMS.length, {
    timeoutMs: 20_000,
    what: "the other webhook's 12 alerts",
  });
  const lastAt = Math.max(...fast.received.map((x) => x.receivedAt));
  // The hung webhook has at most its 2 attempts open at once, round after round.
  await waitFor(
    () => log.filter((x) => x.webhookId === 'hung' && x.outcome === 'failed').length >= 4,
    { timeoutMs: 30_000, what: "two rounds of the hung webhook's attempts" },
  );
  // Every one of them went out before the hung webhook's first attempt gave up: none waited
  // for a slot the hung one held (the box's speed moves both alike; 2,867 ms after the events
  // was seen at a load of 16 on 2 cores, past the 2,500 ms this once asked).
  const firstGaveUp = Math.min(
    ...log.filter((x) => x.webhookId === 'hung').map((x) => Date.parse(x.time)),
  );
  console.log(
    `[isolation] the other webhook's 12 alerts within ${lastAt - sent} ms of their events, ${firstGaveUp - lastAt} ms before the hung webhook's first attempt gave up (${HUNG_MS} ms)`,
  );
  expect(lastAt).toBeLessThan(firstGaveUp);
  expect(hung.peak()).toBeLessThanOrEqual(2);
  // Its jobs wait their turns in the queue, shown by webhook.
  const waiting = await r.registry.getSingleMetricAsString('holdfast_alerter_webhook_jobs_waiting');
  expect(waiting).toMatch(/holdfast_alerter_webhook_jobs_waiting\{webhook="hung"\} [1-9]/);
  expect(waiting).toContain('holdfast_alerter_webhook_jobs_waiting{webhook="pager"} 0');
  expect(log.filter((x) => x.webhookId === 'pager' && x.outcome === 'delivered')).toHaveLength(12);
});

test('a replica that stops hands its waiting jobs back at once: another replica delivers them, none is lost', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const { hung, fast } = await receivers();
  // A failed attempt is retried half a second on: the 2 open when the replica stops come back.
  const settings = { ...SETTINGS, retry: { initialMs: 500, maxMs: 500, retryForMs: 600_000 } };
  const first = await startReplica({
    natsUrl,
    names: iso.names,
    config: configFor(hung.url, fast.url),
    settings,
  });
  await publishEvents(nc, iso.names, crossings());
  await waitFor(() => fast.ids().size === TEAMS.length, { what: "pager's 12 alerts" });
  // `hung` has 2 attempts open and 10 jobs waiting on this replica when it stops.
  await first.stop();
  // The next replica has `hung` pointing at a receiver that answers: its 12 jobs are all
  // delivered, well before the 32 s a job not handed back would wait (the ack wait).
  const fixed = await Receiver.start(SECRET);
  cleanup(() => fixed.stop());
  const stopped = Date.now();
  const second = await startReplica({
    natsUrl,
    names: iso.names,
    config: configFor(fixed.url, fast.url),
    settings,
  });
  cleanup(() => second.stop());
  // The 10 waiting are handed back at once, the 2 attempted come back on their retry, and a
  // job the last pull was still bringing is handed back too (pulled in bursts): all 12.
  await waitFor(() => fixed.ids().size === TEAMS.length, {
    timeoutMs: 5_000,
    what: "hung's 12 jobs on the next replica",
  });
  console.log(
    `[isolation] handed back: delivered at ${fixed.received.map((x) => x.receivedAt - stopped).join(', ')} ms after the stop`,
  );
  expect(fast.ids().size).toBe(TEAMS.length);
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@holdfast/testkit';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { alerterNames } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  settled,
  startReplica,
  window,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

const TEAMS = Array.from({ length: 4 }, (_, i) => `team-${i}`);
const tenants = TEAMS.map((id) => ({
  id,
  budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }],
}));
const hook = (id: string, url: string) => ({
  id,
  url,
  secretEnv: 'HOOK_SECRET',
  events: ['threshold.crossed'],
});

/** A receiver that takes each request and never answers; counts the requests. */
async function hangingReceiver(): Promise<{
  url: string;
  count: () => number;
  stop: () => Promise<void>;
}> {
  let count = 0;
  const server: Server = createServer(() => {
    count++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    count: () => count,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test('a replica that stops starts no attempt that was waiting for a slot: it hands it back, and stops at once', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const hung = await hangingReceiver();
  cleanup(() => hung.stop());
  // 3 hung webhooks, 2 attempts each on their consumers, 2 slots on the replica: 4 wait.
  const r = await startReplica({
    natsUrl,
    names: iso.names,
    config: {
      tenants,
      webhooks: ['a', 'b', 'c'].map((id) => hook(id, `${hung.url}/${id}`)),
    },
    settings: {
      webhookConcurrency: 2,
      webhookConcurrencyPerHook: 2,
      webhookTimeoutMs: 2_000,
      retry: { initialMs: 60_000, maxMs: 60_000, retryForMs: 600_000 },
    },
  });
  let stopped = false;
  cleanup(() => (stopped ? Promise.resolve() : r.stop()));
  await publishEvents(
    nc,
    iso.names,
    TEAMS.map((tenant) =>
      settled({ tenant, time: new Date(), charged: 900, windows: [window(tenant, 1_000, 900)] }),
    ),
  );
  await waitFor(() => hung.count() >= 2 || undefined, { what: 'the 2 slots taken' });
  // Let the other consumers pull and hand their jobs over (they wait for a slot).
  await new Promise((resolve) => setTimeout(resolve, 500));
  const before = hung.count();
  const t0 = Date.now();
  await r.stop();
  stopped = true;
  const tookMs = Date.now() - t0;
  console.log(
    `[consumers] stop took ${tookMs} ms; ${hung.count() - before} attempts started after stop()`,
  );
  expect(hung.count() - before).toBe(0);
  expect(tookMs).toBeLessThan(3_000);
});

test('a webhook whose consumer could not be created is retried at the next sync: it does not stay without one, nor the replica unready', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const own = alerterNames(iso.names);
  const jsm = await jetstreamManager(nc);
  // The queue as an operator left it, taking one consumer only (the alerter keeps an existing
  // stream's limits), and something holds that one for a while (any failure to create the
  // consumer will do: a JetStream API timeout, a leader election).
  await jsm.streams.add({
    name: own.webhookStream,
    subjects: [`${own.webhookSubjectPrefix}.>`],
    max_consumers: 1,
  });
  const r = await startReplica({
    natsUrl,
    names: iso.names,
    config: { tenants, webhooks: [] },
  });
  cleanup(() => r.stop());
  await jsm.consumers.add(own.webhookStream, {
    durable_name: 'squatter',
    filter_subject: `${own.webhookSubjectPrefix}.orphan`,
    ack_policy: AckPolicy.Explicit,
  });
  // A job of a webhook this replica has no consumer for (removed from the config).
  await jetstream(nc).publish(
    `${own.webhookSubjectPrefix}.orphan`,
    JSON.stringify({
      webhookId: 'orphan',
      event: {
        id: 'e1',
        type: 'threshold.crossed',
        time: new Date().toISOString(),
        tenant: 'team-0',
      },
      enqueuedAt: new Date().toISOString(),
    }),
  );
  const ready = () => r.alerter.checks.find((c) => c.name === 'webhook-deliverer')!.check();
  // The periodic sync tries (and fails) to create deliver-orphan.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  await jsm.consumers.delete(own.webhookStream, 'squatter');
  const names = async () => (await jsm.consumers.list(own.webhookStream).next()).map((c) => c.name);
  await waitFor(async () => (await names()).includes('deliver-orphan') || undefined, {
    timeoutMs: 6_000,
    what: 'deliver-orphan created at a later sync',
  });
  await waitFor(() => ready() || undefined, { timeoutMs: 3_000, what: 'the deliverer ready' });
  // Its job is taken (dropped and recorded: the webhook is not in the config), then purged
  // with the consumer (nothing pending).
  await waitFor(
    async () => (await jsm.streams.info(own.webhookStream)).state.messages === 0 || undefined,
    { timeoutMs: 5_000, what: 'the orphan job taken' },
  );
});

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { readyPort, startService, waitFor } from '@holdfast/testkit';
import { jetstream } from '@nats-io/jetstream';
import { expect } from 'vitest';
import {
  cleanupAfterEach,
  publishEvents,
  quiescent,
  readEvents,
  SECRET,
  settled,
  window,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();
const ENTRY = fileURLToPath(new URL('../dist/main.js', import.meta.url));

test('the service process: ops endpoints, and no duplicate crossing after a kill -9 and restart', async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  const dir = await mkdtemp(join(tmpdir(), 'alerter-'));
  cleanup(() => rm(dir, { recursive: true, force: true }));
  const configPath = join(dir, 'holdfast.yaml');
  await writeFile(
    configPath,
    JSON.stringify({
      tenants: [{ id: 'team-m', budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }] }],
      webhooks: [
        {
          id: 'finance',
          url: receiver.url,
          secretEnv: 'HOOK_SECRET',
          events: ['threshold.crossed'],
        },
      ],
    }),
  );
  // ALERTER_OPS_PORT 0: the ops server binds a port of its own choosing, logged in the ready
  // line. A port picked free beforehand can be taken by another test's connection first.
  const env = {
    NATS_URL: natsUrl,
    ...natsNamesToEnv(iso.names),
    HOLDFAST_CONFIG: configPath,
    HOOK_SECRET: SECRET,
    ALERTER_OPS_PORT: '0',
    ALERTER_WEBHOOK_RETRY_INITIAL_MS: '200',
  };
  let service = await startService(ENTRY, env);
  cleanup(() => service.stop());

  // The first process's ops server: the restarted one below (another port) is not asked.
  const ops = `http://127.0.0.1:${readyPort(service, 'opsPort')}`;
  expect((await fetch(`${ops}/healthz`)).status).toBe(200);
  const ready = await waitFor(async () => {
    const r = await fetch(`${ops}/readyz`);
    return r.status === 200 ? ((await r.json()) as { checks: Record<string, boolean> }) : undefined;
  });
  expect(ready.checks).toEqual({ nats: true, 'events-consumer': true, 'webhook-deliverer': true });

  let used = 0;
  const settle = (delta: number) => {
    used += delta;
    return settled({
      tenant: 'team-m',
      time: new Date(),
      charged: Math.max(0, delta),
      windows: [window('team-m', 1_000, used)],
    });
  };
  const first = settle(850);
  await publishEvents(nc, iso.names, [first]);
  // Delivered and every event acked (a crash before an ack would only mean a redelivery
  // after the 30-s ack wait, deduplicated, which this test does not wait for).
  await waitFor(async () => receiver.ids().size === 1 && (await quiescent(nc, iso.names)), {
    what: 'the first crossing delivered',
  });
  const metrics = await (await fetch(`${ops}/metrics`)).text();
  expect(metrics).toMatch(
    /holdfast_alerter_webhook_deliveries_total\{[^}]*outcome="delivered"[^}]*\} 1/,
  );
  expect(metrics).toContain('holdfast_alerter_webhook_delivery_latency_seconds_bucket');

  // kill -9, then a new process: the state is shared, so staying above 80% (and the old
  // event delivered again) fires nothing; falling below and crossing again fires once more.
  await service.crash();
  service = await startService(ENTRY, env);
  await publishEvents(nc, iso.names, [settle(50)]);
  // The first event again, as a redelivery brings it (the same event id; another Nats-Msg-Id
  // only so the stream takes it): its crossing has the same id and is not recorded twice.
  await jetstream(nc).publish(
    `${iso.names.eventsPrefix}.${first.tenant}.${first.type}`,
    JSON.stringify(first),
    { msgID: `${first.id}.again` },
  );
  await publishEvents(nc, iso.names, [settle(-400), settle(300)]);
  await waitFor(async () => receiver.ids().size === 2 && (await quiescent(nc, iso.names)), {
    what: 'the second crossing delivered and every event handled',
  });
  const crossings = (await readEvents(nc, iso.names)).filter((e) => e.type === 'threshold.crossed');
  expect(crossings.map((c) => c.id).sort()).toEqual([...receiver.ids()].sort());
  expect(receiver.received).toHaveLength(2);

  await service.stop();
  expect(await service.exited).toBe(0);
});

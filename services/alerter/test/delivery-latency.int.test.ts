import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { natsNamesToEnv } from '@holdfast/config';
import { startService, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  cleanupAfterEach,
  percentiles,
  publishEvents,
  SECRET,
  settled,
  startReplica,
  window,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

/** Sizes; `pnpm --filter @holdfast/alerter bench` runs this file with bigger ones. */
const CROSSINGS = Number(process.env.BENCH_CROSSINGS ?? 150);
const PER_SECOND = Number(process.env.BENCH_CROSSINGS_PER_SECOND ?? 50);
const FILLER = Number(process.env.BENCH_FILLER_EVENTS ?? 20);
/** 1: the two replicas run as service processes (dist/main.js) instead of in this process. */
const PROCESSES = process.env.BENCH_PROCESSES === '1';
const ENTRY = fileURLToPath(new URL('../dist/main.js', import.meta.url));

/**
 * Delivery latency, measured: from a threshold crossing (the authority event's time) to the
 * signed webhook's arrival at a real receiver, with two replicas and background settlements.
 * Prints figures; asserts only that every crossing arrived once (no timed assertion).
 */
test('delivery latency from crossing to receiver under event load (prints figures)', async ({
  nc,
  natsUrl,
  iso,
  receiver,
}) => {
  const tenants = Array.from({ length: CROSSINGS }, (_, i) => `t${i}`);
  const config = {
    tenants: [
      ...tenants.map((id) => ({ id, budgets: [{ window: 'month', limit: 1_000, soft: [0.8] }] })),
      { id: 'background', budgets: [{ window: 'month', limit: 1e12 }] },
    ],
    webhooks: [
      { id: 'bench', url: receiver.url, secretEnv: 'HOOK_SECRET', events: ['threshold.crossed'] },
    ],
  };
  if (PROCESSES) {
    const dir = await mkdtemp(join(tmpdir(), 'alerter-bench-'));
    cleanup(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'holdfast.json'), JSON.stringify(config));
    for (let i = 0; i < 2; i++) {
      const service = await startService(ENTRY, {
        NATS_URL: natsUrl,
        ...natsNamesToEnv(iso.names),
        HOLDFAST_CONFIG: join(dir, 'holdfast.json'),
        HOOK_SECRET: SECRET,
        // Port 0: a port picked free beforehand could be taken before the child binds it.
        ALERTER_OPS_PORT: '0',
      });
      cleanup(() => service.stop());
    }
  } else {
    for (let i = 0; i < 2; i++) {
      const r = await startReplica({ natsUrl, names: iso.names, config });
      cleanup(() => r.stop());
    }
  }

  let background = 0;
  const filler = () => {
    background += 10;
    return settled({
      tenant: 'background',
      time: new Date(),
      charged: 10,
      windows: [window('background', 1e12, background)],
    });
  };
  const started = Date.now();
  for (let i = 0; i < CROSSINGS; i++) {
    const t = tenants[i]!;
    const crossing = settled({
      tenant: t,
      time: new Date(),
      charged: 900,
      windows: [window(t, 1_000, 900)],
    });
    const batch = Array.from({ length: FILLER }, filler);
    batch.splice(FILLER / 2, 0, crossing);
    await publishEvents(nc, iso.names, batch, 4);
    // Pace the load (a steady rate, not a wait for a condition).
    const due = started + ((i + 1) * 1_000) / PER_SECOND;
    if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
  }
  const seconds = (Date.now() - started) / 1_000;
  await waitFor(() => receiver.ids().size >= CROSSINGS, {
    timeoutMs: 60_000,
    what: 'every crossing delivered',
  });
  expect(receiver.received.length).toBe(receiver.ids().size);

  const latency = percentiles(
    receiver.received.map((r) => r.receivedAt - Date.parse(r.payload.timestamp)),
  );
  const events = CROSSINGS * (FILLER + 1);
  console.log(
    `[alerter] delivery latency crossing -> receiver, ms: ${JSON.stringify(latency)} ` +
      `(2 replicas ${PROCESSES ? 'as processes' : 'in the test process'}; ${events} events in ${seconds.toFixed(1)} s = ${Math.round(events / seconds)}/s; ${CROSSINGS} crossings at ${PER_SECOND}/s)`,
  );
});

import { startTestAuthority } from '@holdfast/budget-authority/testing';
import type { NatsNames, ThresholdCrossed } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { alerterNames } from '../src/index.js';
import {
  cleanupAfterEach,
  publishEvents,
  quiescent,
  readEvents,
  settled,
  startReplica,
  window,
  type Replica,
  alerterTest as test,
} from './harness.js';

const cleanup = cleanupAfterEach();

/** A month of 1,000 tokens that warns at `soft`. */
const config = (soft: number) => ({
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    { id: 'gpt-4o-mini', upstream: 'default', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
  ],
  tenants: [
    {
      id: 'team-c',
      budgets: [{ window: 'month', limit: 1_000, soft: [soft] }],
      useCases: [{ id: 'UC-1', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
    },
  ],
});

/** An authority with `cfg`, and an alerter replica reading its config from it; stopped after. */
async function withAuthority(
  fx: {
    nc: NatsConnection;
    natsUrl: string;
    redisUrl: string;
    iso: { names: NatsNames; keyPrefix: string };
  },
  cfg: ReturnType<typeof config>,
) {
  const { nc, natsUrl, redisUrl, iso } = fx;
  const authority = await startTestAuthority({
    natsUrl,
    redisUrl,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: cfg,
    clock: false,
  });
  cleanup(() => authority.stop());
  const replica = await startReplica({
    natsUrl,
    names: iso.names,
    config: cfg,
    configFromAuthority: true,
  });
  cleanup(() => replica.stop());
  return { authority, replica };
}

test("an admin's new soft threshold applies to the next event: the alerter keeps no policy of the old config", async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const { authority } = await withAuthority({ nc, natsUrl, redisUrl, iso }, config(0.9));
  const crossings = async () =>
    (await readEvents(nc, iso.names)).filter(
      (e): e is ThresholdCrossed => e.type === 'threshold.crossed' && e.tenant === 'team-c',
    );
  let used = 850;
  const publish = () =>
    publishEvents(nc, iso.names, [
      settled({
        tenant: 'team-c',
        time: new Date(),
        charged: 1,
        windows: [window('team-c', 1_000, ++used)],
      }),
    ]);

  // 85% of a window that warns at 90%: nothing, and the alerter has the window's policy.
  await publish();
  await waitFor(() => quiescent(nc, iso.names), { what: 'the first settlement handled' });
  expect(await crossings()).toHaveLength(0);

  // The admin lowers it to 80%: the authority's config.changed makes the alerter reload, and
  // the next usage below 90% crosses the new threshold (an old config's policy never would).
  const applied = await authority.authority.ctx.config.apply(config(0.8), 'test');
  expect(applied.ok).toBe(true);
  await waitFor(
    async () => {
      if (used < 899) await publish();
      return (await crossings()).length > 0;
    },
    { timeoutMs: 15_000, intervalMs: 200, what: 'a crossing of the new 80% threshold' },
  );
  const [crossed] = await crossings();
  expect(crossed).toMatchObject({ tenant: 'team-c', threshold: 0.8 });
  expect(used).toBeLessThan(900);
});

test('every replica reloads a new config, not only the one the config.changed event went to', async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
}) => {
  const authority = await startTestAuthority({
    natsUrl,
    redisUrl,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: config(0.9),
    clock: false,
  });
  cleanup(() => authority.stop());
  const replicas: Replica[] = [];
  for (let i = 0; i < 2; i++) {
    const r = await startReplica({
      natsUrl,
      names: iso.names,
      config: config(0.9),
      configFromAuthority: true,
    });
    cleanup(() => r.stop());
    replicas.push(r);
  }
  const reloads = async (r: Replica) => {
    const m = await r.registry.getSingleMetric('holdfast_alerter_config_reloads_total')!.get();
    return m.values.find((v) => v.labels.result === 'ok')?.value ?? 0;
  };

  // An admin applies a config through the authority (as the edge's admin API does): its
  // config.changed event goes to one replica; the other learns from the authority's notice.
  const applied = await authority.client.configApply({ document: config(0.8), source: 'test' });
  expect(applied).toMatchObject({ ok: true, value: { changed: true } });
  await waitFor(async () => (await Promise.all(replicas.map(reloads))).every((n) => n >= 1), {
    timeoutMs: 10_000,
    what: 'both replicas reloaded the config',
  });
  await waitFor(() => quiescent(nc, iso.names), { what: 'the config.changed event handled' });
});

test("a webhook an admin adds has its own consumer at once (its first alert out within the alert's 5 s), deleted once it is removed", async ({
  nc,
  natsUrl,
  redisUrl,
  iso,
  receiver,
}) => {
  const { authority } = await withAuthority({ nc, natsUrl, redisUrl, iso }, config(0.8));
  const hook = {
    id: 'pager',
    url: receiver.url,
    secretEnv: 'HOOK_SECRET',
    events: ['threshold.crossed'],
  };
  const applied = await authority.authority.ctx.config.apply(
    { ...config(0.8), webhooks: [hook] },
    'test',
  );
  expect(applied.ok).toBe(true);
  // Each webhook's jobs are consumed by its own consumer: the new one's is started on the
  // reload, not at the next periodic sync.
  await waitFor(async () => (await consumerNames(nc, iso)).includes('deliver-pager') || undefined, {
    timeoutMs: 1_500,
    what: "the new webhook's consumer",
  });
  const sent = Date.now();
  await publishEvents(nc, iso.names, [
    settled({
      tenant: 'team-c',
      time: new Date(),
      charged: 850,
      windows: [window('team-c', 1_000, 850)],
    }),
  ]);
  const alert = await waitFor(() => receiver.received[0], { what: 'the new webhook alert' });
  expect(alert.receivedAt - sent).toBeLessThan(5_000);
  // Removed again, with its jobs all taken: its consumer is deleted.
  expect((await authority.authority.ctx.config.apply(config(0.8), 'test')).ok).toBe(true);
  await waitFor(
    async () => !(await consumerNames(nc, iso)).includes('deliver-pager') || undefined,
    { timeoutMs: 5_000, what: "the removed webhook's consumer deleted" },
  );
});

async function consumerNames(nc: NatsConnection, iso: { names: NatsNames }): Promise<string[]> {
  const jsm = await jetstreamManager(nc);
  const consumers = await jsm.consumers.list(alerterNames(iso.names).webhookStream).next();
  return consumers.map((c) => c.name);
}

import { parseConfig } from '@holdfast/config';
import { closesStream, type NatsNames } from '@holdfast/events';
import { startTestAuthority } from '@holdfast/budget-authority/testing';
import {
  connectNats,
  createLogger,
  ensureClosesStream,
  ensureEventsStream,
} from '@holdfast/runtime';
import {
  findBinary,
  infraTest as test,
  startNatsCluster,
  waitFor,
  type NatsCluster,
} from '@holdfast/testkit';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Registry } from 'prom-client';
import { expect } from 'vitest';
import { alerterNames, DEFAULT_SETTINGS, startAlerter } from '../src/index.js';
import { call } from './authority.js';
import { cleanupAfterEach, percentiles, SECRET } from './harness.js';
import { Receiver } from './receiver.js';

const cleanup = cleanupAfterEach();

/** Who the killed node was to the alert's path (one node may be several of them). */
const ROLES = ['alerter connection', 'authority connection', 'events leader', 'consumer leader'];
type Role = (typeof ROLES)[number];
const REPEATS = Number(process.env.KILL_REPEATS ?? 2);
/**
 * What the alert's path adds to the election a kill causes (from the later of the crossing and
 * every raft group on the path having a leader again, to the webhook) is a figure this test
 * prints, not one it asserts (a timing is measured, not tested): p50 0.3-1 s, p95 1.5-2.4 s
 * measured, and about 1 round in 30 took 7-11 s more, the webhook queue's publishes failing for
 * seconds after every leader was back (not explained yet, see docs/alerts.md). The election itself
 * is nats-server's: a follower waits 4-9 s (raft.go's minElectionTimeoutDefault..
 * maxElectionTimeoutDefault, not configurable) before it runs. What is asserted: every crossing
 * is delivered, none stuck past the election by more than STUCK_MS.
 */
const SLOW_MS = 2_500;
const STUCK_MS = 20_000;

const document = (tenants: string[], hookUrl: string) => ({
  upstreams: [{ id: 'default', baseUrl: 'http://127.0.0.1:8089/v1' }],
  models: [
    { id: 'gpt-4o-mini', upstream: 'default', price: { inputPerMTok: 0.15, outputPerMTok: 0.6 } },
  ],
  tenants: tenants.map((id) => ({
    id,
    mode: 'reserve',
    budgets: [{ window: 'month', limit: 1_000, soft: [0.5] }],
    useCases: [{ id: 'UC-1', maxTokens: 1_000, models: ['gpt-4o-mini'] }],
  })),
  webhooks: [{ id: 'hook', url: hookUrl, secretEnv: 'HOOK_SECRET', events: ['threshold.crossed'] }],
  alerts: { suspendAtHardLimit: false },
});

/**
 * A 3-node NATS cluster, every stream, consumer and bucket at R3, the authority and the
 * alerter each connected with the services' own connection options. Each round kill -9s the
 * node that plays one role in the alert's path (the alerter's server, the authority's, the
 * events stream's leader, the alerter consumer's leader), crosses a threshold through the
 * authority at once (admit, settle) and times the settle's answer to the signed webhook's
 * arrival; the node comes back before the next round.
 */
test('a threshold crossed right after a NATS node is killed -9 is delivered as soon as the leaders on its path are elected again', async ({
  redisUrl,
  iso,
}) => {
  const bin = findBinary('nats-server');
  if (!bin) throw new Error('nats-server not found: apt-get install -y nats-server');
  const cluster = await startNatsCluster(bin, { nodes: 3 });
  cleanup(() => cluster.stop());
  const logger = createLogger({ name: 'kill-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const nc = await connectNats({ servers: cluster.url, name: 'kill-test', logger });
  cleanup(() => nc.close());
  const jsm = await jetstreamManager(nc);
  // R3 before the services start: they keep the replicas of streams that exist.
  await ensureEventsStream(jsm, iso.names, { replicas: 3 });
  await ensureClosesStream(jsm, iso.names, { replicas: 3 });

  const tenants = Array.from({ length: ROLES.length * REPEATS }, (_, i) => `r${i}`);
  const receiver = await Receiver.start(SECRET);
  cleanup(() => receiver.stop());
  const doc = document(tenants, receiver.url);
  const authority = await startTestAuthority({
    natsUrl: cluster.url,
    redisUrl,
    nc,
    names: iso.names,
    keyPrefix: iso.keyPrefix,
    config: doc,
    clock: false,
  });
  cleanup(() => authority.stop());
  const parsed = parseConfig(doc);
  if (!parsed.ok) throw new Error(parsed.error.errors.join('\n'));
  const alerterNc = await connectNats({ servers: cluster.url, name: 'holdfast-alerter', logger });
  cleanup(() => alerterNc.close());
  const alerter = await startAlerter({
    nc: alerterNc,
    names: iso.names,
    config: parsed.value,
    logger,
    registry: new Registry(),
    settings: { ...DEFAULT_SETTINGS, streamReplicas: 3 },
    secrets: { HOOK_SECRET: SECRET },
  });
  cleanup(() => alerter.stop());

  const rounds: { role: Role; node: string; ms: number; electionMs: number; afterMs: number }[] =
    [];
  for (const [i, tenant] of tenants.entries()) {
    const role = ROLES[i % ROLES.length]!;
    const victim = await nodeOf(role, cluster, jsm, iso.names);
    const c = call(tenant, 100, 500);
    expect(await authority.client.admit(c)).toMatchObject({ ok: true, value: { admitted: true } });
    const killedAt = Date.now();
    await cluster.kill(victim);
    const elected = leadersBack(cluster, pathGroups(iso.names));
    elected.catch(() => undefined); // awaited below, after the webhook
    const usage = { promptTokens: 100, completionTokens: 500 };
    const settle = { reservationId: c.reservationId, tenant, usage };
    await waitFor(async () => (await authority.client.settle(settle)).ok, {
      timeoutMs: 30_000,
      what: `${tenant}'s settle`,
    });
    const crossedAt = Date.now();
    const got = await waitFor(
      () => receiver.received.find((r) => r.payload.data.tenant === tenant),
      { timeoutMs: 60_000, intervalMs: 20, what: `${tenant}'s webhook` },
    );
    const electedAt = await elected;
    rounds.push({
      role,
      node: cluster.nodes[victim]!.name,
      ms: got.receivedAt - crossedAt,
      electionMs: electedAt - killedAt,
      afterMs: Math.max(0, got.receivedAt - Math.max(crossedAt, electedAt)),
    });
    await cluster.restart(victim);
    await healed(jsm, iso.names);
  }
  const byRole = Object.fromEntries(
    ROLES.map((r) => [r, rounds.filter((x) => x.role === r).map((x) => [x.ms, x.electionMs])]),
  );
  const stat = (k: 'ms' | 'electionMs' | 'afterMs') => percentiles(rounds.map((r) => r[k]));
  console.log(
    `[alerter] kill -9 of a NATS node, then a crossing, ms: settle -> webhook ${JSON.stringify(stat('ms'))}; ` +
      `kill -> every leader on the path back ${JSON.stringify(stat('electionMs'))}; ` +
      `webhook after both ${JSON.stringify(stat('afterMs'))}; by role [total, election] ${JSON.stringify(byRole)}`,
  );
  const slow = rounds.filter((r) => r.afterMs >= SLOW_MS);
  console.log(
    `[alerter] rounds whose webhook came ${SLOW_MS} ms or more after both: ${JSON.stringify(slow)}`,
  );
  const stuck = rounds.filter((r) => r.afterMs >= STUCK_MS);
  expect(stuck, 'webhooks stuck long after every leader was back').toEqual([]);
}, 600_000);

/** The node that plays `role` now. */
async function nodeOf(
  role: Role,
  cluster: NatsCluster,
  jsm: JetStreamManager,
  names: NatsNames,
): Promise<number> {
  let name: string | undefined;
  if (role === 'events leader') name = (await jsm.streams.info(names.eventsStream)).cluster?.leader;
  else if (role === 'consumer leader') {
    name = (await jsm.consumers.info(names.eventsStream, DEFAULT_SETTINGS.consumer)).cluster
      ?.leader;
  } else {
    const client = role === 'alerter connection' ? 'holdfast-alerter' : 'budget-authority-';
    for (const n of cluster.nodes) {
      const res = await fetch(`http://127.0.0.1:${n.monitorPort}/connz`);
      const body = (await res.json()) as { connections?: { name?: string }[] };
      if (body.connections?.some((c) => c.name?.startsWith(client))) name = n.name;
    }
  }
  const i = cluster.nodes.findIndex((n) => n.name === name);
  if (i < 0) throw new Error(`no node is the ${role}`);
  return i;
}

/** The raft groups an alert goes through: stream (or bucket) name, and consumer names on it. */
function pathGroups(names: NatsNames): Map<string, string[]> {
  const own = alerterNames(names);
  return new Map([
    [names.eventsStream, [DEFAULT_SETTINGS.consumer]],
    [`KV_${own.stateBucket}`, []],
    [own.webhookStream, ['deliver-hook']],
  ]);
}

interface JszStream {
  name: string;
  cluster?: { leader?: string };
  consumer_detail?: { name: string; cluster?: { leader?: string } }[];
}

/**
 * When every group of `groups` has a leader on a running node again, as a running node's
 * monitoring endpoint (/jsz) sees it, polled every 100 ms.
 */
async function leadersBack(cluster: NatsCluster, groups: Map<string, string[]>): Promise<number> {
  const live = () => cluster.nodes.filter((n) => n.running());
  const leads = (leader: string | undefined) => live().some((n) => n.name === leader);
  await waitFor(
    async () => {
      const res = await fetch(
        `http://127.0.0.1:${live()[0]!.monitorPort}/jsz?accounts=true&streams=true&consumers=true`,
      );
      const jsz = (await res.json()) as { account_details?: { stream_detail?: JszStream[] }[] };
      const streams = jsz.account_details?.flatMap((a) => a.stream_detail ?? []) ?? [];
      return [...groups].every(([stream, consumers]) => {
        const s = streams.find((x) => x.name === stream);
        if (!s || !leads(s.cluster?.leader)) return false;
        return consumers.every((c) =>
          leads(s.consumer_detail?.find((x) => x.name === c)?.cluster?.leader),
        );
      });
    },
    { timeoutMs: 60_000, intervalMs: 100, what: 'a leader for every group on the path' },
  );
  return Date.now();
}

/** Every stream the path uses has a leader and every replica current again. */
async function healed(jsm: JetStreamManager, names: NatsNames): Promise<void> {
  const streams = [names.eventsStream, closesStream(names).name];
  await waitFor(
    async () => {
      for (const s of streams) {
        const info = await jsm.streams.info(s).catch(() => undefined);
        const c = info?.cluster;
        if (!c?.leader || c.replicas?.length !== 2 || !c.replicas.every((r) => r.current)) {
          return false;
        }
      }
      return true;
    },
    { timeoutMs: 30_000, what: 'the streams whole again' },
  );
}

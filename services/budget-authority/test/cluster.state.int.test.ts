import type { LocalRedisCluster } from '@holdfast/testkit';
import type { NatsNames } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import { describe, expect } from 'vitest';
import { Keys } from '../src/keys.js';
import { stateKeys } from '../src/rebuild.js';
import { keysBySlot, slotOf } from '../src/redis.js';
import { spreadOrgs, useRedisCluster } from './cluster-harness.js';
import { activity, CONFIG, outboxesRelayed, rebuilder } from './rebuild-activity.js';
import { authorityTest as test, newId } from './harness.js';
import { startTestAuthority } from '../src/testing.js';
import { orgsConfig } from './load.js';

/**
 * Issue 13's cluster state, with no load and nothing timed (beside the other files; the load,
 * the scripts library and the kill -9 of a master run alone, cluster.int.test.ts): the state
 * rebuilt onto the cluster, a team moved across masters, the adoption walk in its slot, and
 * stored responses and files owned across orgs on a real Redis Cluster (3 masters, a replica
 * each, started here on free ports).
 */

const { cluster: c, admin: a } = useRedisCluster();

describe('Redis Cluster state', () => {
  test('the budget state rebuilt from the stream onto the cluster equals the state that wrote it', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const [cluster, admin] = [c(), a()];
    const on = {
      natsUrl,
      redisUrl: cluster.url,
      nc,
      names: iso.names,
      keyPrefix: iso.keyPrefix,
      config: CONFIG,
      durability: { replicas: 1, timeoutMs: 2_000 },
      redisTimeoutMs: 3_000,
    };
    const h = await startTestAuthority(on);
    const live = await activity(h);
    const keys = new Keys(iso.keyPrefix);
    await outboxesRelayed(admin, keys);
    const before = await h.client.usage({});
    const now = h.clock.now;
    await h.stop();

    // Every budget key, found on every master (SCAN per node), deleted slot by slot.
    const lost = await stateKeys(admin, keys);
    const slots = [...new Set(lost.map(slotOf))];
    const masters = new Set(await Promise.all(slots.map((slot) => cluster.masterOf(slot))));
    expect(masters.size).toBeGreaterThan(1);
    for (const group of keysBySlot(admin, lost)) await admin.del(...group);
    expect(await stateKeys(admin, keys)).toEqual([]);
    const rebuilt = await rebuilder({ redis: admin, nc, names: iso.names, keys, now }).run();
    expect(rebuilt).toMatchObject({ liveHolds: 4 });

    const h2 = await startTestAuthority(on);
    try {
      h2.clock.now = now;
      const after = await h2.client.usage({});
      expect(after.ok && after.value.tenants).toEqual(before.ok && before.value.tenants);
      const settled = await h2.client.settle({
        reservationId: live[0]!,
        tenant: 'team-r',
        usage: { promptTokens: 108, completionTokens: 10 },
      });
      expect(settled).toMatchObject({ ok: true, value: { status: 'settled', billedTokens: 118 } });
    } finally {
      await h2.stop();
    }
  }, 60_000);

  test("a team moved to an org on another master with calls in flight: each call closes in its own slot, each org's windows bill their own calls", async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const admin = a();
    const { orgs, h, admitWith } = await ownersAuthority(c(), { nc, natsUrl, iso });
    const [from, to] = [orgs[0]!, orgs[4]!];
    const team = `${from}-a`;
    const keys = new Keys(iso.keyPrefix);
    expect(slotOf(from)).not.toBe(slotOf(to));
    try {
      const admitted = async () => {
        const r = await admitWith(team, {});
        if (!r.ok || !r.value.admitted) throw new Error(`not admitted: ${JSON.stringify(r)}`);
        return r.value;
      };
      const early = [await admitted(), await admitted()];
      const base = orgsConfig(orgs);
      const moved = {
        ...base,
        tenants: base.tenants.map((t) => (t.id === team ? { ...t, parent: to } : t)),
      };
      expect((await h.client.configApply({ document: moved })).ok).toBe(true);
      const later = [await admitted(), await admitted()];
      expect(later.map((x) => x.org)).toEqual([to, to]);
      const settled = await Promise.all(
        [...early, ...later].map((x) =>
          h.client.settle({
            reservationId: x.reservationId,
            tenant: team,
            org: x.org,
            upstream: x.upstream,
            model: 'm',
            usage: { promptTokens: 10, completionTokens: 1 },
          }),
        ),
      );
      expect(settled.map((r) => r.ok && r.value.status)).toEqual(Array(4).fill('settled'));
      // Each org's windows billed its own two calls (11 tokens each), none held.
      for (const org of [from, to]) {
        for (const [level, budget] of [
          [team, 'minute-tokens'],
          [org, 'day-tokens'],
        ] as const) {
          const w = await admin.hmget(keys.window(org, level, budget), 'h', 's');
          expect([org, level, Number(w[0] ?? 0), Number(w[1] ?? 0)]).toEqual([org, level, 0, 22]);
        }
        expect(await admin.zcard(keys.holds(org, team))).toBe(0);
      }
    } finally {
      await h.stop();
    }
  }, 60_000);
  const walked =
    'a budget added with 1,100 calls in flight: the walk copies the in-flight set in its slot, two admissions adopt them all';
  test(
    walked,
    async ({ nc, natsUrl, iso }) => {
      const admin = a();
      const { orgs, h, admitWith } = await ownersAuthority(c(), { nc, natsUrl, iso });
      const team = `${orgs[1]!}-b`;
      const keys = new Keys(iso.keyPrefix);
      try {
        for (let i = 0; i < 55; i++) {
          const batch = await Promise.all(Array.from({ length: 20 }, () => admitWith(team, {})));
          for (const r of batch) {
            if (!r.ok || !r.value.admitted) throw new Error(`not admitted: ${JSON.stringify(r)}`);
          }
        }
        const base = orgsConfig(orgs);
        const minute = { window: 'minute', limit: 30_000, unit: 'tokens' };
        const added = {
          ...base,
          tenants: base.tenants.map((t) =>
            t.id === team ? { ...t, budgets: [...t.budgets, minute] } : t,
          ),
        };
        expect((await h.client.configApply({ document: added })).ok).toBe(true);
        const first = await admitWith(team, {});
        expect(first.ok && !first.value.admitted && first.value.code).toBe('concurrency_limit');
        const second = await admitWith(team, {});
        expect(second.ok && second.value.admitted).toBe(true);
        const w = keys.window(orgs[1]!, team, 'minute-tokens');
        expect(Number(await admin.hget(w, 'h'))).toBe(1_101 * 20);
      } finally {
        await h.stop();
      }
    },
    60_000,
  );
  test("a response's owner is recorded in its org's slot, on every master, and only its team's admits continue it", async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const admin = a();
    const { orgs, h, admitWith, settleOwning } = await ownersAuthority(c(), { nc, natsUrl, iso });
    const admit = (tenant: string, previousResponseId?: string) =>
      admitWith(tenant, previousResponseId ? { previousResponseId } : {});
    try {
      for (const org of orgs) {
        await settleOwning(`${org}-a`, await admit(`${org}-a`), { responseId: `resp_${org}` });
      }
      const owners = await Promise.all(
        orgs.map((org) => admin.get(new Keys(iso.keyPrefix).responseOwner(org, `resp_${org}`))),
      );
      expect(owners).toEqual(orgs.map((org) => `${org}-a`));
      for (const [i, org] of orgs.entries()) {
        const own = await admit(`${org}-a`, `resp_${org}`);
        expect(own.ok && own.value.admitted, org).toBe(true);
        const other = orgs[(i + 1) % orgs.length]!;
        for (const tenant of [`${org}-b`, `${other}-a`]) {
          const r = await admit(tenant, `resp_${org}`);
          expect(!r.ok && r.error.code, tenant).toBe('response_not_found');
        }
      }
    } finally {
      await h.stop();
    }
  }, 60_000);
  test("a file a call's output made is its team's across orgs (its own slot, beside the org's): another org's team is refused it, an unknown file passes", async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const admin = a();
    const { orgs, h, admitWith, settleOwning } = await ownersAuthority(c(), { nc, natsUrl, iso });
    const admit = (tenant: string, itemIds: string[]) => admitWith(tenant, { itemIds });
    try {
      for (const org of orgs) {
        // One close records a container in the org's slot and a file in the files' slot.
        await settleOwning(`${org}-a`, await admit(`${org}-a`, ['file_unknown']), {
          itemIds: [`container_${org}`, `file_${org}`],
        });
      }
      const keys = new Keys(iso.keyPrefix);
      const owners = await Promise.all(orgs.map((org) => admin.get(keys.fileOwner(`file_${org}`))));
      expect(owners).toEqual(orgs.map((org) => `${org}-a`));
      for (const [i, org] of orgs.entries()) {
        const own = await admit(`${org}-a`, [`container_${org}`, `file_${org}`, 'file_none']);
        expect(own.ok && own.value.admitted, org).toBe(true);
        const other = orgs[(i + 1) % orgs.length]!;
        for (const tenant of [`${org}-b`, `${other}-a`]) {
          const r = await admit(tenant, [`file_${org}`]);
          expect(!r.ok && r.error.code, tenant).toBe('item_not_found');
        }
      }
    } finally {
      await h.stop();
    }
  }, 60_000);
});

/**
 * An authority on the cluster with the orgs spread over its masters (one replica waited for),
 * and an admit of 10 + 10 tokens for a tenant with the stored state it names.
 */
async function ownersAuthority(
  cluster: LocalRedisCluster,
  f: {
    nc: NatsConnection;
    natsUrl: string;
    iso: { token: string; names: NatsNames; keyPrefix: string };
  },
) {
  const { orgs } = await spreadOrgs(cluster, f.iso.token);
  const h = await startTestAuthority({
    natsUrl: f.natsUrl,
    redisUrl: cluster.url,
    nc: f.nc,
    names: f.iso.names,
    keyPrefix: f.iso.keyPrefix,
    config: orgsConfig(orgs),
    durability: { replicas: 1, timeoutMs: 2_000 },
    redisTimeoutMs: 3_000,
  });
  const admitWith = (tenant: string, stored: { previousResponseId?: string; itemIds?: string[] }) =>
    h.client.admit({
      reservationId: newId(),
      tenant,
      keyId: null,
      useCase: 'uc',
      model: 'm',
      promptTokens: 10,
      maxTokens: 10,
      ...stored,
    });
  /** Settles an admitted call (10 + 1 tokens) that made the stored state `owned` names. */
  const settleOwning = async (
    tenant: string,
    admitted: Awaited<ReturnType<typeof admitWith>>,
    owned: { responseId?: string; itemIds?: string[] },
  ) => {
    const a = admitted;
    if (!a.ok || !a.value.admitted) throw new Error(`not admitted: ${JSON.stringify(a)}`);
    const settled = await h.client.settle({
      reservationId: a.value.reservationId,
      tenant,
      org: a.value.org,
      upstream: a.value.upstream,
      model: 'm',
      usage: { promptTokens: 10, completionTokens: 1 },
      ...owned,
    });
    expect(settled).toMatchObject({ ok: true, value: { status: 'settled' } });
  };
  return { orgs, h, admitWith, settleOwning };
}

import { waitFor } from '@holdfast/testkit';
import { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import { slotOf } from '../src/redis.js';
import { clusterReplicas, spreadOrgs, useRedisCluster } from './cluster-harness.js';
import { authorityTest as test, quiescent, readEvents } from './harness.js';
import { checkBooks, orgsConfig, startLoad, teamsOf } from './load.js';

/**
 * Issue 13, resharding under load: the slot of one org moves to another master (CLUSTER
 * SETSLOT IMPORTING/MIGRATING, MIGRATE of its keys, SETSLOT NODE, as `redis-cli --cluster
 * reshard` does it) while 256 calls are in flight. Its scripts meet ASK and TRYAGAIN while its
 * keys are split over two nodes: that org fails closed meanwhile, the others are served on;
 * once the slot has moved, the authority follows MOVED to the new master by itself; no limit
 * is exceeded and the books agree.
 */

const { cluster: c, admin: a } = useRedisCluster();

const node = (port: number) => {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 });
  r.on('error', () => undefined);
  return r;
};

/** Moves `slot` from the master on `from` to the master on `to`, key batch by key batch. */
async function moveSlot(slot: number, from: number, to: number, all: number[]): Promise<number> {
  const [src, dst] = [node(from), node(to)];
  try {
    const [srcId, dstId] = [String(await src.cluster('MYID')), String(await dst.cluster('MYID'))];
    await dst.cluster('SETSLOT', slot, 'IMPORTING', srcId);
    await src.cluster('SETSLOT', slot, 'MIGRATING', dstId);
    let moved = 0;
    for (;;) {
      const keys = await src.cluster('GETKEYSINSLOT', slot, 20);
      if (keys.length === 0) break;
      await src.migrate('127.0.0.1', to, '', 0, 5_000, 'KEYS', ...keys);
      moved += keys.length;
      // Batch by batch, so calls meet the slot half moved.
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const port of all) {
      const n = node(port);
      await n.cluster('SETSLOT', slot, 'NODE', dstId).finally(() => n.disconnect());
    }
    return moved;
  } finally {
    src.disconnect();
    dst.disconnect();
  }
}

describe('Redis Cluster resharding', () => {
  test("moving an org's slot under load: that org fails closed while its keys are split, then follows MOVED; the books agree", async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const [cluster, admin] = [c(), a()];
    const { orgs, masterOf } = await spreadOrgs(cluster, iso.token);
    const reps = await clusterReplicas(cluster, iso, { nc, natsUrl }, orgsConfig(orgs));
    try {
      const teams = teamsOf(orgs);
      const { books, end } = await startLoad(reps[0]!.client, teams);
      const moving = orgs[0]!;
      const from = masterOf.get(moving)!;
      const masters = await cluster.masters();
      const to = masters.find((m) => m !== from)!;
      const moved = await moveSlot(slotOf(moving), from, to, masters);
      expect(moved).toBeGreaterThan(5);
      expect(await cluster.masterOf(slotOf(moving))).toBe(to);
      books.since = Date.now();
      await waitFor(() => (books.answeredAfter.get(moving) ?? 0) > 5, {
        timeoutMs: 20_000,
        what: 'the moved org answered again',
      });
      await end();

      const errors = [...books.errors];
      const others = errors.filter(([k]) => k.split(' ')[0] !== moving);
      console.log(
        `moved ${moved} keys of ${moving} from ${from} to ${to}; admitted ${books.admitted}; errors ${JSON.stringify(errors)}`,
      );
      // Other orgs: at most a stray timeout on this loaded box while the topology changes.
      expect(others.reduce((n, [, x]) => n + x, 0)).toBeLessThanOrEqual(3);
      const final = await quiescent(reps[0]!.client, admin, iso.keyPrefix, 30_000);
      checkBooks(final, await readEvents(nc, iso.names), teams, books);
    } finally {
      await Promise.all(reps.map((r) => r.stop()));
    }
  }, 60_000);
});

import { AuthorityClient } from '@holdfast/runtime';
import { waitFor } from '@holdfast/testkit';
import type { NatsNames } from '@holdfast/events';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Cluster } from 'ioredis';
import { describe, expect } from 'vitest';
import { slotOf } from '../src/redis.js';
import { scriptLibrary } from '../src/scripts.js';
import { clusterReplicas, spreadOrgs, useRedisCluster } from './cluster-harness.js';
import { authorityTest as test, quiescent, readEvents } from './harness.js';
import {
  checkBooks,
  newBooks,
  orgsConfig,
  runLoad,
  startLoad,
  teamsOf,
  watchStalls,
} from './load.js';

/**
 * Issue 13 on a real Redis Cluster (3 masters, a replica each, started here on free ports):
 * the concurrency proof with 3 authority replicas over 12 orgs spread over the masters, and
 * kill -9 of a master under that load with WAIT 1: its replica is promoted, only its orgs fail
 * closed meanwhile and they recover on their own, no limit is exceeded, and the ledger holds
 * exactly what was acknowledged as settled (no acknowledged write was lost with the master).
 */

const { cluster: c, admin: a } = useRedisCluster();

/** 12 orgs spread over the masters, and 3 authority replicas serving them. */
async function replicasOverOrgs(fx: {
  nc: NatsConnection;
  natsUrl: string;
  iso: { token: string; keyPrefix: string; names: NatsNames };
}) {
  const [cluster, admin] = [c(), a()];
  const { orgs } = await spreadOrgs(cluster, fx.iso.token);
  const reps = await clusterReplicas(cluster, fx.iso, fx, orgsConfig(orgs));
  return { admin, orgs, reps };
}

describe('Redis Cluster', () => {
  test('256+ calls in flight from 3 replicas over 12 orgs on 3 masters: no limit exceeded, no hold left, the books agree', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const { admin, orgs, reps } = await replicasOverOrgs({ nc, natsUrl, iso });
    try {
      const teams = teamsOf(orgs);
      const books = newBooks();
      await runLoad(reps[0]!.client, teams, books, { workers: 300, calls: 5 });
      expect(books.peak).toBeGreaterThanOrEqual(256);
      // Nothing fails, but a stray call the loaded box could not get replicated in time (it is
      // then refused, never acknowledged): at most 0.5% of the calls.
      const errors = [...books.errors.values()].reduce((n, x) => n + x, 0);
      expect(errors, JSON.stringify([...books.errors])).toBeLessThanOrEqual(
        (books.admitted + books.refused) / 200,
      );
      expect(books.refused).toBeGreaterThan(0);
      const final = await quiescent(reps[0]!.client, admin, iso.keyPrefix, 30_000);
      checkBooks(final, await readEvents(nc, iso.names), teams, books);
    } finally {
      await Promise.all(reps.map((r) => r.stop()));
    }
  }, 60_000);

  test('every master holds the scripts library; one that loses it under load gets it back, no call fails', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const { name } = scriptLibrary();
    const { admin, orgs, reps } = await replicasOverOrgs({ nc, natsUrl, iso });
    try {
      const masters = (admin as Cluster).nodes('master');
      expect(masters).toHaveLength(3);
      for (const m of masters) {
        expect(await m.call('FUNCTION', 'LIST', 'LIBRARYNAME', name)).toHaveLength(1);
      }
      const teams = teamsOf(orgs);
      const books = newBooks();
      const load = runLoad(reps[0]!.client, teams, books, { workers: 64, calls: 20 });
      while (books.admitted + books.refused < 300) await new Promise((r) => setTimeout(r, 5));
      // FUNCTION FLUSH replicates: the master and its replica both lose the library.
      await masters[0]!.call('FUNCTION', 'FLUSH');
      await load;
      expect(books.admitted + books.refused).toBe(64 * 20);
      const errors = [...books.errors.values()].reduce((n, x) => n + x, 0);
      // As in the no-fault test: only a stray call the loaded box could not replicate in time.
      expect(errors, JSON.stringify([...books.errors])).toBeLessThanOrEqual(
        (books.admitted + books.refused) / 200,
      );
      expect(await masters[0]!.call('FUNCTION', 'LIST', 'LIBRARYNAME', name)).toHaveLength(1);
      const final = await quiescent(reps[0]!.client, admin, iso.keyPrefix, 30_000);
      checkBooks(final, await readEvents(nc, iso.names), teams, books);
    } finally {
      await Promise.all(reps.map((r) => r.stop()));
    }
  }, 60_000);

  test('kill -9 of a master under load: its replica takes over, only its orgs fail closed and recover, nothing acknowledged is lost', async ({
    nc,
    natsUrl,
    iso,
  }) => {
    const [cluster, admin] = [c(), a()];
    const { orgs, masterOf } = await spreadOrgs(cluster, iso.token);
    const reps = await clusterReplicas(cluster, iso, { nc, natsUrl }, orgsConfig(orgs));
    try {
      const teams = teamsOf(orgs);
      // As the edge asks: what one turn asks for in one batch, admits given up after 1 s. An
      // org whose master is down must not hold up the others' answers in the same batch.
      const edgeLike = new AuthorityClient({ nc, names: iso.names, timeoutMs: 1_000, batch: true });
      const { books, end } = await startLoad(edgeLike, teams);
      const box = watchStalls(nc);
      // Not the master of the upstream's capacity slot: that one is shared by every org, and
      // its failover fails closed every call to the upstream (docs/operations.md).
      const capacityMaster = await cluster.masterOf(slotOf('cap:u'));
      const victim = [...masterOf.values()].find((m) => m !== capacityMaster)!;
      // Its replica falls behind first (paused, as if cut off): what the master acknowledges
      // now is on the master only, so a kill loses it unless the authority waited (WAIT 1).
      const replica = await cluster.aReplicaOf(victim);
      cluster.pause(replica);
      await new Promise((r) => setTimeout(r, 600));
      const killedAt = Date.now();
      cluster.kill(victim);
      cluster.resume(replica);
      const hit = orgs.filter((o) => masterOf.get(o) === victim);
      await waitFor(async () => !(await cluster.masters()).includes(victim), {
        timeoutMs: 20_000,
        what: 'the replica promoted',
      });
      const promotedMs = Date.now() - killedAt;
      // The promoted master has no replica yet: WAIT 1 cannot be met, so its orgs stay closed
      // (nothing is acknowledged that one more failure could lose) while the others go on.
      const errorsBefore = [...books.errors.values()].reduce((a, b) => a + b, 0);
      await new Promise((r) => setTimeout(r, 1_000));
      expect([...books.errors.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(errorsBefore);
      // The dead node is restarted from its files, as an orchestrator would: it rejoins as the
      // new master's replica, and the affected orgs are answered again without any help.
      await cluster.restart(victim);
      books.since = Date.now();
      await waitFor(() => hit.every((o) => (books.answeredAfter.get(o) ?? 0) > 5), {
        timeoutMs: 30_000,
        what: 'the affected orgs answered again',
      });
      const recoveredMs = Date.now() - killedAt;
      await end();
      await box.stop();

      const errorsOf = (on: boolean) =>
        [...books.errors]
          .filter(([k]) => hit.includes(k.split(' ')[0]!) === on)
          .reduce((n, [, c]) => n + c, 0);
      // The figures the docs quote, and how long the box itself stalled meanwhile (a load of
      // 16 on 2 cores: 26 stalls, 16.4 s in all, every org's calls timed out alike, 205-326
      // each, the killed master's orgs as the others: the box, not the cluster).
      console.log(
        `killed master ${victim}; replica promoted after ${promotedMs} ms; answered again ${recoveredMs} ms after the kill; admitted ${books.admitted}, refused ${books.refused}; errors ${JSON.stringify([...books.errors])}; ` +
          `the box stalled ${box.stalls.length} times (${box.total()} ms in all)`,
      );
      expect(books.peak).toBeGreaterThanOrEqual(256);
      // The killed master's orgs failed closed; the others were served on. A loaded 2-core box
      // times out calls of every org alike when it stalls, and so would a batch held up by the
      // dead master's items (1,175 errors of the other orgs before a batch was answered in
      // parts): so an org of the others has at most a tenth of the errors of an org of the
      // killed master, in the same run on the same box (at a load of 4-5: 5.4 against 473 an
      // org, with the box stalled 1.7 s; 1% of their total, the bound before, was 18.9 of 43).
      expect(errorsOf(true)).toBeGreaterThan(100);
      const perOrg = (on: boolean) =>
        errorsOf(on) / orgs.filter((o) => hit.includes(o) === on).length;
      expect(perOrg(false)).toBeLessThanOrEqual(Math.max(3 / 8, perOrg(true) / 10));

      const final = await quiescent(reps[0]!.client, admin, iso.keyPrefix, 30_000);
      checkBooks(final, await readEvents(nc, iso.names), teams, books);
      await cluster.waitOk();
    } finally {
      await Promise.all(reps.map((r) => r.stop()));
    }
  }, 150_000);
});

import { setTimeout as sleep } from 'node:timers/promises';
import { deadLetterStream } from '@holdfast/events';
import { infraTest as test, startNatsCluster, waitFor, serverBinary } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect } from 'vitest';
import { testClickHouse } from './books.js';
import { BEHAVIOUR, consumersCaughtUp, readBooks, streamedLoad } from './kill-load.js';
import { startProcessStack } from './processes.js';

/**
 * A 3-node NATS cluster, every service given all three servers and HOLDFAST_STREAM_REPLICAS=3.
 * Under 16 workers of streamed calls the node leading the events stream is killed with kill -9
 * and restarted 2 s later: admissions go on (or fail closed for a moment), no event is lost or
 * counted twice (the mock's bill = ledger = ClickHouse), the aggregator and the alerter resume.
 */
test('kill -9 of one NATS server of three under load: nothing lost, nothing counted twice, consumers resume', async ({
  redisUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  void clickhouse;
  const bin = serverBinary('nats');
  const cluster = await startNatsCluster(bin, { nodes: 3 });
  try {
    const s = await startProcessStack({
      natsUrl: cluster.url,
      redisUrl,
      clickhouseUrl,
      iso,
      replicas: 3,
      behaviour: BEHAVIOUR,
    });
    const ch = testClickHouse(clickhouseUrl);
    try {
      const jsm = await jetstreamManager(s.nc);
      for (const stream of [iso.names.eventsStream, deadLetterStream(iso.names).name]) {
        expect((await jsm.streams.info(stream)).config.num_replicas).toBe(3);
      }
      const load = streamedLoad(s.edgeUrl, 16);
      await load.served(80);
      const leader = (await jsm.streams.info(iso.names.eventsStream)).cluster?.leader;
      const victim = cluster.nodes.findIndex((n) => n.name === leader);
      expect(victim).toBeGreaterThanOrEqual(0);
      await cluster.kill(victim);
      await sleep(2_000);
      await cluster.restart(victim);
      await load.served(80);
      const stats = await load.stop();
      const books = await readBooks(s, ch, iso.database);
      await consumersCaughtUp(s, iso.names);
      const after = await jsm.streams.info(iso.names.eventsStream);
      console.log(
        `[kill -9 NATS ${leader}] served ${stats.served}, failed closed ${stats.failedClosed}; new leader ${after.cluster?.leader}; books ${JSON.stringify(books)}`,
      );
      expect(stats.other).toEqual([]);
      expect(stats.cut).toBe(0);
      expect(books.ledger).toEqual(books.provider);
      expect(books.clickhouse).toEqual(books.ledger);
      // The restarted node catches up: the stream is whole on three servers again.
      await waitFor(
        async () => {
          const info = await jsm.streams.info(iso.names.eventsStream);
          return (
            info.cluster?.replicas?.length === 2 && info.cluster.replicas.every((r) => r.current)
          );
        },
        { timeoutMs: 20_000, what: 'every replica of the events stream current' },
      );
    } finally {
      await ch.close();
      await s.stop();
    }
  } finally {
    await cluster.stop();
  }
}, 240_000);

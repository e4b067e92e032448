import { deadLetterStream, eventSubject } from '@holdfast/events';
import {
  isolation,
  startNatsCluster,
  waitFor,
  type NatsCluster,
  serverBinary,
} from '@holdfast/testkit';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createLogger } from './logger.js';
import { connectNats, ensureEventsStream } from './nats.js';

let cluster: NatsCluster;
let nc: NatsConnection;

beforeAll(async () => {
  const bin = serverBinary('nats');
  cluster = await startNatsCluster(bin, { nodes: 3 });
  nc = await connectNats({
    servers: cluster.url,
    name: 'cluster-test',
    logger: createLogger({ name: 'cluster-test', level: 'silent' }),
  });
}, 90_000);

afterAll(async () => {
  await nc?.close();
  await cluster?.stop();
});

test('HOLDFAST_STREAM_REPLICAS=3 creates R3 events and dead-letter streams; an existing R1 stream stays R1, with a warning', async () => {
  const jsm = await jetstreamManager(nc);
  const { names } = isolation();
  await ensureEventsStream(jsm, names, { replicas: 3 });
  const events = await jsm.streams.info(names.eventsStream);
  expect(events.config.num_replicas).toBe(3);
  expect(events.cluster?.replicas?.length).toBe(2);
  expect((await jsm.streams.info(deadLetterStream(names).name)).config.num_replicas).toBe(3);

  const other = isolation().names;
  await ensureEventsStream(jsm, other, { replicas: 1 });
  const warnings: unknown[] = [];
  const logger = createLogger({ name: 'x', level: 'warn' });
  logger.warn = (obj: unknown) => void warnings.push(obj);
  await ensureEventsStream(jsm, other, { replicas: 3, logger });
  expect((await jsm.streams.info(other.eventsStream)).config.num_replicas).toBe(1);
  expect(warnings).toContainEqual({ stream: other.eventsStream, replicas: 1, configured: 3 });
});

test('an R3 stream takes publishes through kill -9 of a node, keeps every one, and the node catches up after its restart', async () => {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const { names } = isolation();
  await ensureEventsStream(jsm, names, { replicas: 3 });
  const subject = eventSubject(names, 'team', 'reservation.created');
  let acked = 0;
  const publishUntil = async (n: number) => {
    for (; acked < n;) {
      try {
        await js.publish(subject, `${acked}`, { msgID: `m${acked}`, timeout: 2_000 });
        acked++;
      } catch {
        // A leader election after the kill: the same msgID again is deduplicated.
      }
    }
  };
  await publishUntil(200);
  const leader = (await jsm.streams.info(names.eventsStream)).cluster?.leader;
  const victim = cluster.nodes.findIndex((n) => n.name === leader);
  await cluster.kill(victim);
  await publishUntil(400);
  await new Promise((r) => setTimeout(r, 2_000));
  await cluster.restart(victim);
  await publishUntil(600);
  expect((await jsm.streams.info(names.eventsStream)).state.messages).toBe(600);
  // The restarted node catches up from the others (a moment, on a busy box).
  await waitFor(
    async () => {
      const info = await jsm.streams.info(names.eventsStream);
      return info.cluster?.replicas?.length === 2 && info.cluster.replicas.every((r) => r.current);
    },
    { timeoutMs: 20_000, what: 'every replica current' },
  );
}, 60_000);

/**
 * What R3 costs a publisher: JetStream publishes (acked, with a Nats-Msg-Id, an event-sized
 * body) into the events stream on one nats-server at R1, and on a 3-node cluster at R1 and R3,
 * 1 and 64 in flight. `pnpm --filter @holdfast/runtime bench` (BENCH_ROUNDS, BENCH_SECONDS).
 * Uses nats-server from PATH; everything on loopback.
 */
import { randomUUID } from 'node:crypto';
import { eventSubject, namesWithPrefix } from '@holdfast/events';
import {
  closedLoop,
  median,
  startNatsCluster,
  startNatsServer,
  type LoadResult,
  serverBinary,
} from '@holdfast/testkit/infra';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { ensureEventsStream } from '../src/nats.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const BODY = JSON.stringify({
  id: randomUUID(),
  type: 'reservation.settled',
  pad: 'x'.repeat(700),
});

async function measure(url: string, replicas: number, concurrency: number): Promise<LoadResult> {
  const nc = await connect({ servers: url.split(',') });
  const names = namesWithPrefix(`b${randomUUID().slice(0, 8)}`);
  await ensureEventsStream(await jetstreamManager(nc), names, { replicas });
  const js = jetstream(nc);
  const subject = eventSubject(names, 'team', 'reservation.settled');
  const result = await closedLoop(
    () => js.publish(subject, BODY, { msgID: randomUUID() }),
    concurrency,
    SECONDS * 1_000,
  );
  await (await jetstreamManager(nc)).streams.delete(names.eventsStream);
  await nc.close();
  return result;
}

const bin = serverBinary('nats');
const single = await startNatsServer(bin);
const cluster = await startNatsCluster(bin, { nodes: 3 });
const cases = [
  { name: 'one server, R1', url: single.url, replicas: 1 },
  { name: '3-node cluster, R1', url: cluster.url, replicas: 1 },
  { name: '3-node cluster, R3', url: cluster.url, replicas: 3 },
];
try {
  const rows: string[] = [];
  for (const concurrency of [1, 64]) {
    for (const c of cases) {
      const runs: LoadResult[] = [];
      for (let r = 0; r < ROUNDS; r++) runs.push(await measure(c.url, c.replicas, concurrency));
      const f = (xs: number[], d = 2) => median(xs).toFixed(d);
      rows.push(
        `| ${c.name.padEnd(18)} | ${String(concurrency).padStart(3)} | ${f(
          runs.map((x) => x.perSecond),
          0,
        ).padStart(
          7,
        )}/s | p50 ${f(runs.map((x) => x.p50))} ms | p99 ${f(runs.map((x) => x.p99))} ms | errors ${runs.reduce((a, x) => a + x.errors, 0)} |`,
      );
    }
  }
  console.log(
    `JetStream publishes, medians of ${ROUNDS} runs of ${SECONDS} s:\n${rows.join('\n')}`,
  );
} finally {
  await cluster.stop();
  await single.stop();
}

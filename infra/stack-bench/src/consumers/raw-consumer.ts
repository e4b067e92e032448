import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox, type Msg } from '@nats-io/transport-node';

/**
 * The raw path beside the two consumers in `bench:consumers`: a process that consumes the
 * events stream as the alerter does (a durable pull consumer, 64 messages pulled ahead) and
 * does the least any consumer must: decode and JSON.parse each event, then ack it. Its CPU per
 * event is the floor of this machine's NATS client at that rate, against which ours are read.
 *
 * With RAW_PULL_EVERY_MS it pulls in bursts instead: every that many ms one `no_wait` pull of
 * what is stored (up to 10,000), so one socket read carries many events (the lever docs/
 * benchmarks.md names for the aggregator; nats.js 3.4's consume() and fetch() have no no_wait).
 */
const STREAM = 'HOLDFAST_EVENTS';
const DURABLE = process.env.RAW_DURABLE ?? 'bench-raw';
const PULL_EVERY_MS = Number(process.env.RAW_PULL_EVERY_MS ?? 0);
const ACK = new TextEncoder().encode('+ACK');

const nc = await connect({ servers: process.env.NATS_URL, name: DURABLE });
const jsm = await jetstreamManager(nc);
// The services create the stream with its real settings; with none of them, nothing to read.
await jsm.streams.info(STREAM).catch(() => {
  throw new Error(`no stream ${STREAM}: start the aggregator or the alerter first`);
});
await jsm.consumers.add(STREAM, {
  durable_name: DURABLE,
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.New,
  max_ack_pending: 10_000,
});
let parsed = 0;
const take = (data: Uint8Array) => {
  const event = JSON.parse(new TextDecoder().decode(data)) as { id?: unknown };
  if (typeof event.id === 'string') parsed += 1;
};

if (PULL_EVERY_MS > 0) {
  const inbox = createInbox();
  // Status messages (404 no messages, 408) have no reply subject; events do.
  nc.subscribe(inbox, {
    callback: (_err, m: Msg) => {
      if (!m.reply) return;
      take(m.data);
      m.respond(ACK);
    },
  });
  const next = `$JS.API.CONSUMER.MSG.NEXT.${STREAM}.${DURABLE}`;
  const pull = JSON.stringify({ batch: 10_000, no_wait: true });
  const timer = setInterval(() => nc.publish(next, pull, { reply: inbox }), PULL_EVERY_MS);
  process.stdout.write(`${JSON.stringify({ msg: 'ready' })}\n`);
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  clearInterval(timer);
} else {
  const consumer = await jetstream(nc).consumers.get(STREAM, DURABLE);
  const messages = await consumer.consume({ max_messages: 64 });
  process.once('SIGTERM', () => messages.stop());
  process.stdout.write(`${JSON.stringify({ msg: 'ready' })}\n`);
  for await (const m of messages) {
    take(m.data);
    m.ack();
  }
}
process.stdout.write(`${JSON.stringify({ msg: 'stopped', parsed })}\n`);
await nc.drain();

import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

/**
 * The raw path beside the two consumers in `bench:consumers`: a process that consumes the
 * events stream as the alerter does (a durable pull consumer, 64 messages pulled ahead) and
 * does the least any consumer must: decode and JSON.parse each event, then ack it. Its CPU per
 * event is the floor of this machine's NATS client at that rate, against which ours are read.
 */
const STREAM = 'HOLDFAST_EVENTS';
const DURABLE = 'bench-raw';

const nc = await connect({ servers: process.env.NATS_URL, name: 'bench-raw-consumer' });
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
const consumer = await jetstream(nc).consumers.get(STREAM, DURABLE);
const messages = await consumer.consume({ max_messages: 64 });
process.once('SIGTERM', () => {
  messages.stop();
});
process.stdout.write(`${JSON.stringify({ msg: 'ready' })}\n`);
let parsed = 0;
for await (const m of messages) {
  const event = JSON.parse(new TextDecoder().decode(m.data)) as { id?: unknown };
  if (typeof event.id === 'string') parsed += 1;
  m.ack();
}
process.stdout.write(`${JSON.stringify({ msg: 'stopped', parsed })}\n`);
await nc.drain();

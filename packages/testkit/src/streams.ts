import { parseEvent, type HoldfastEvent, type NatsNames } from '@holdfast/events';
import { DeliverPolicy, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/**
 * Every message a stream holds now, in stream order, read by an ordered consumer (nothing to
 * ack or clean up) in batches of what is left; with `subjectPrefix`, only those whose subject
 * starts with it (filtered here: NATS 2.9 has no `filter_subjects` on ordered consumers).
 */
export async function readStream(
  nc: NatsConnection,
  stream: string,
  subjectPrefix = '',
): Promise<JsMsg[]> {
  const last = (await (await jetstreamManager(nc)).streams.info(stream)).state.last_seq;
  if (last === 0) return [];
  const consumer = await jetstream(nc).consumers.get(stream, {
    deliver_policy: DeliverPolicy.All,
  });
  const out: JsMsg[] = [];
  for (let seq = 0; seq < last;) {
    let got = 0;
    for await (const m of await consumer.fetch({ max_messages: last - seq, expires: 5_000 })) {
      got++;
      seq = m.seq;
      if (m.subject.startsWith(subjectPrefix)) out.push(m);
      if (seq >= last) break;
    }
    if (got === 0) break;
  }
  return out;
}

/** Every event on the events stream so far, in stream order; one that does not validate throws. */
export async function readEvents(nc: NatsConnection, names: NatsNames): Promise<HoldfastEvent[]> {
  return (await readStream(nc, names.eventsStream)).map((m) => {
    const parsed = parseEvent(m.data);
    if (!parsed.ok) throw new Error(`event #${m.seq}: ${parsed.error.message}`);
    return parsed.value;
  });
}

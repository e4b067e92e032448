import type { ConsumerInfo, JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { JETSTREAM_OP_TIMEOUT_MS } from '../nats.js';

/** At most this many deliveries made during one purge are queued again (a few, at any rate). */
const MAX_REQUEUED = 10_000;

/**
 * What `purgeAcked` did with a consumer: purged what lay at or below its ack floor, or left
 * the stream alone (`unacked`: the server would forget the consumer's deliveries still
 * unacked, below).
 */
export type AckedPurge =
  | { kind: 'purged'; purged: number; floor: number; raced: boolean; requeued: number }
  | { kind: 'skipped'; reason: 'unacked' };

/**
 * Whether a purge makes this nats-server forget every delivery of the consumer still
 * unacked: before 2.9.15 `consumer.purge` sets its pending list to nil, so a message
 * delivered and not yet acked (in flight, or nak'd with a delay) is never delivered again
 * and its nak is ignored. From 2.9.15 it drops only what lies at or below the purge.
 */
export function purgeForgetsPending(serverVersion: string | undefined): boolean {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(serverVersion ?? '');
  if (!m) return true;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (major !== 2) return major < 2;
  return minor < 9 || (minor === 9 && patch < 15);
}

/**
 * Purges from `c`'s stream the messages its consumer has acked: those of its filter subject
 * (of the whole stream when it has none) up to its ack floor, which the consumer never
 * delivers again. Idempotent: any replica may run it, and a floor read late purges less.
 *
 * On a server where a purge forgets the consumer's unacked deliveries (`forgetsPending`), it
 * purges only while the consumer has none. A message delivered between the read of `c` and
 * the purge is still forgotten there (its ack is ignored, a failure's nak does not bring it
 * back): `raced` says the consumer delivered in that time, and each message of its filter it
 * delivered then is published again as a copy (`requeued`), under a Nats-Msg-Id made from its
 * sequence, so replicas that saw the same race queue one copy. Its consumer handles the message
 * at least once, as before: twice when the first delivery also succeeded, so the readers of a
 * stream purged this way must take a message twice (a close is idempotent, a webhook job
 * carries its `webhook-id`).
 */
export async function purgeAcked(
  jsm: JetStreamManager,
  js: JetStreamClient,
  c: ConsumerInfo,
  opts: { forgetsPending: boolean },
): Promise<AckedPurge> {
  if (opts.forgetsPending && c.num_ack_pending > 0) return { kind: 'skipped', reason: 'unacked' };
  const floor = c.ack_floor.stream_seq;
  // Nothing acked: nothing to purge. A purge up to sequence 1 (or 0) is the server's "purge
  // all" (PurgeEx): every message of the filter, delivered or not.
  if (floor === 0) return { kind: 'purged', purged: 0, floor, raced: false, requeued: 0 };
  const filter = c.config.filter_subject;
  const r = await jsm.streams.purge(
    c.stream_name,
    filter ? { filter, seq: floor + 1 } : { seq: floor + 1 },
  );
  let raced = false;
  let requeued = 0;
  if (opts.forgetsPending) {
    const after = await jsm.consumers.info(c.stream_name, c.name);
    raced = after.delivered.stream_seq !== c.delivered.stream_seq;
    if (raced) {
      requeued = await requeue(jsm, js, c, after.delivered.stream_seq);
    }
  }
  return { kind: 'purged', purged: r.purged, floor, raced, requeued };
}

/**
 * Publishes again, as copies, the messages of `c`'s filter the consumer delivered after `c`
 * was read, up to `to` (the purge may have forgotten any of them); returns how many.
 */
async function requeue(
  jsm: JetStreamManager,
  js: JetStreamClient,
  c: ConsumerInfo,
  to: number,
): Promise<number> {
  const filter = c.config.filter_subject;
  let n = 0;
  const from = Math.max(c.delivered.stream_seq + 1, to - MAX_REQUEUED + 1);
  for (let seq = from; seq <= to; seq++) {
    const m = await jsm.streams.getMessage(c.stream_name, { seq });
    if (!m || (filter && !subjectMatches(filter, m.subject))) continue;
    const h = headers();
    for (const [k, v] of m.header) {
      if (!k.toLowerCase().startsWith('nats-')) for (const value of v) h.append(k, value);
    }
    const id = m.header.get('Nats-Msg-Id') || `${c.stream_name}.${seq}`;
    await js.publish(m.subject, m.data, {
      headers: h,
      msgID: `${id}.again.${seq}`,
      timeout: JETSTREAM_OP_TIMEOUT_MS,
    });
    n++;
  }
  return n;
}

/** Whether a NATS `subject` matches `filter` (`*` one token, `>` the rest). */
function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '>') return s.length > i;
    if (i >= s.length || (f[i] !== '*' && f[i] !== s[i])) return false;
  }
  return f.length === s.length;
}

import type { ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';

/**
 * What `purgeAcked` did with a consumer: purged what lay at or below its ack floor, or left
 * the stream alone (`unacked`: the server would forget the consumer's deliveries still
 * unacked, below).
 */
export type AckedPurge =
  | { kind: 'purged'; purged: number; floor: number; raced: boolean }
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
 * purges only while the consumer has none; a message delivered between the read of `c` and
 * the purge is still forgotten there, and `raced` says one was (its ack still counts; a
 * failure's nak does not bring it back).
 */
export async function purgeAcked(
  jsm: JetStreamManager,
  c: ConsumerInfo,
  opts: { forgetsPending: boolean },
): Promise<AckedPurge> {
  if (opts.forgetsPending && c.num_ack_pending > 0) return { kind: 'skipped', reason: 'unacked' };
  const floor = c.ack_floor.stream_seq;
  const filter = c.config.filter_subject;
  const r = await jsm.streams.purge(
    c.stream_name,
    filter ? { filter, seq: floor + 1 } : { seq: floor + 1 },
  );
  let raced = false;
  if (opts.forgetsPending) {
    const after = await jsm.consumers.info(c.stream_name, c.name);
    raced = after.delivered.stream_seq !== c.delivered.stream_seq;
  }
  return { kind: 'purged', purged: r.purged, floor, raced };
}

import { infraTest as test } from '@holdfast/testkit';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { purgeAcked, purgeForgetsPending } from './purge-acked.js';

/** Up to `max` messages of a consumer, waiting at most `ms` for them. */
async function take(js: JetStreamClient, stream: string, name: string, max: number, ms: number) {
  const out: JsMsg[] = [];
  const deadline = Date.now() + ms;
  while (out.length < max && Date.now() < deadline) {
    const c = await js.consumers.get(stream, name);
    const batch = await c.fetch({ max_messages: max - out.length, expires: 1_000 });
    for await (const m of batch) out.push(m);
  }
  return out;
}

/** A limits stream of its own with a durable per filter (`<prefix>.<hook>`), deleted after `fn`. */
async function withQueue(
  nc: NatsConnection,
  name: string,
  hooks: string[],
  fn: (q: {
    jsm: JetStreamManager;
    js: JetStreamClient;
    stream: string;
    prefix: string;
  }) => Promise<void>,
) {
  const jsm = await jetstreamManager(nc);
  const stream = name.toUpperCase();
  const prefix = name.toLowerCase();
  await jsm.streams.add({
    name: stream,
    subjects: [`${prefix}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
  });
  try {
    for (const hook of hooks) {
      await jsm.consumers.add(stream, {
        durable_name: hook,
        filter_subject: `${prefix}.${hook}`,
        ack_policy: AckPolicy.Explicit,
        ack_wait: nanos(30_000),
      });
    }
    await fn({ jsm, js: jetstream(nc), stream, prefix });
  } finally {
    await jsm.streams.delete(stream);
  }
}

test("purgeAcked removes what a consumer acked, up to its ack floor, and no delivery still unacked (its own or another filter's) is forgotten", async ({
  nc,
  iso,
}) => {
  await withQueue(
    nc,
    `${iso.names.eventsStream}_PURGE`,
    ['a', 'b'],
    async ({ jsm, js, stream, prefix }) => {
      for (const subject of ['a', 'a', 'a', 'b']) await js.publish(`${prefix}.${subject}`, subject);
      // a: the first acked, the next two failed (nak'd with a delay); b: its one failed too.
      const [a1, ...failed] = await take(js, stream, 'a', 3, 5_000);
      const [b1] = await take(js, stream, 'b', 1, 5_000);
      await a1!.ackAck();
      for (const m of [...failed, b1!]) m.nak(500);
      const forgetsPending = purgeForgetsPending(nc.info?.version);
      const first = await purgeAcked(jsm, js, await jsm.consumers.info(stream, 'a'), {
        forgetsPending,
      });
      // On a server that forgets unacked deliveries in a purge (2.9.10 here) nothing is purged yet.
      expect(first).toEqual(
        forgetsPending
          ? { kind: 'skipped', reason: 'unacked' }
          : { kind: 'purged', purged: 1, floor: a1!.seq, raced: false, requeued: 0 },
      );
      // Every failed one comes back after its delay, once.
      const again = [
        ...(await take(js, stream, 'a', 2, 5_000)),
        ...(await take(js, stream, 'b', 1, 5_000)),
      ];
      expect(again.map((m) => [m.seq, m.info.deliveryCount])).toEqual(
        [...failed, b1!].map((m) => [m.seq, 2]),
      );
      for (const m of again) await m.ackAck();
      const second = await purgeAcked(jsm, js, await jsm.consumers.info(stream, 'a'), {
        forgetsPending,
      });
      expect(second).toMatchObject({ kind: 'purged', purged: forgetsPending ? 3 : 2 });
      // b's job is b's consumer's to purge: stored until then.
      const stored = async () =>
        (await jsm.streams.info(stream, { subjects_filter: '>' })).state.subjects ?? {};
      expect(await stored()).toEqual({ [`${prefix}.b`]: 1 });
      await purgeAcked(jsm, js, await jsm.consumers.info(stream, 'b'), { forgetsPending });
      expect(await stored()).toEqual({});
    },
  );
});

test('a job delivered between the read of its consumer and the purge is not lost: on a server that forgets it, a copy is queued and delivered once', async ({
  nc,
  iso,
}) => {
  await withQueue(
    nc,
    `${iso.names.eventsStream}_RACE`,
    ['a'],
    async ({ jsm, js, stream, prefix }) => {
      await js.publish(`${prefix}.a`, 'done');
      const [done] = await take(js, stream, 'a', 1, 5_000);
      await done!.ackAck();
      await js.publish(`${prefix}.b`, 'other');
      await js.publish(`${prefix}.a`, 'raced', { msgID: 'job-raced' });
      // The purger reads the consumer (nothing unacked), then the job is delivered before the
      // purge runs: the interleaving a purge on a busy queue can meet, made here in order.
      const read = await jsm.consumers.info(stream, 'a');
      const [raced] = await take(js, stream, 'a', 1, 5_000);
      const forgetsPending = purgeForgetsPending(nc.info?.version);
      const r = await purgeAcked(jsm, js, read, { forgetsPending });
      expect(r).toEqual({
        kind: 'purged',
        purged: 1,
        floor: done!.seq,
        raced: forgetsPending,
        requeued: forgetsPending ? 1 : 0,
      });
      // A second replica that saw the same race queues no second copy (the copy's Nats-Msg-Id).
      if (forgetsPending) {
        const before = (await jsm.streams.info(stream)).state.last_seq;
        await purgeAcked(jsm, js, read, { forgetsPending });
        expect((await jsm.streams.info(stream)).state.last_seq).toBe(before);
      }
      // Its attempt fails: the job comes back once, itself or (where the purge forgot it) its copy.
      raced!.nak(200);
      const again = await take(js, stream, 'a', 2, 3_000);
      expect(again.map((m) => m.string())).toEqual(['raced']);
      for (const m of again) await m.ackAck();
    },
  );
});

test('a consumer that has acked nothing (ack floor 0) has nothing purged: a purge from sequence 1 would take every message of its filter', async ({
  nc,
  iso,
}) => {
  await withQueue(
    nc,
    `${iso.names.eventsStream}_FLOOR0`,
    ['a'],
    async ({ jsm, js, stream, prefix }) => {
      await js.publish(`${prefix}.a`, 'not yet delivered');
      const forgetsPending = purgeForgetsPending(nc.info?.version);
      const r = await purgeAcked(jsm, js, await jsm.consumers.info(stream, 'a'), {
        forgetsPending,
      });
      expect(r).toEqual({ kind: 'purged', purged: 0, floor: 0, raced: false, requeued: 0 });
      const [m] = await take(js, stream, 'a', 1, 5_000);
      expect(m?.string()).toBe('not yet delivered');
      await m!.ackAck();
    },
  );
});

import { infraTest as test } from '@holdfast/testkit';
import { ensureEventsStream } from '@holdfast/runtime';
import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { loadConfig } from './env.js';
import { ensureConsumer } from './consumer.js';

test('a consumer left by an older release is brought to the configured limits at start', async ({
  nc,
  iso,
}) => {
  const jsm = await jetstreamManager(nc);
  await ensureEventsStream(jsm, iso.names);
  // As an earlier release left it: 50,000 unacked at most, 30 s ack wait.
  const older = {
    durable: 'billing-aggregator',
    fetchSize: 2_000,
    maxAckPending: 50_000,
    ackWaitMs: 30_000,
  };
  await ensureConsumer(jsm, iso.names, older);
  expect(
    (await jsm.consumers.info(iso.names.eventsStream, older.durable)).config.max_ack_pending,
  ).toBe(50_000);

  const now = loadConfig({}).consumer;
  expect(now.maxAckPending).toBe(125_000);
  await ensureConsumer(jsm, iso.names, { ...now, ackWaitMs: 45_000 });
  const info = await jsm.consumers.info(iso.names.eventsStream, older.durable);
  expect(info.config.max_ack_pending).toBe(125_000);
  expect(info.config.ack_wait).toBe(nanos(45_000));
  expect(info.config.ack_policy).toBe(AckPolicy.Explicit);
});

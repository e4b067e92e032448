import { createRequire } from 'node:module';
import { CALL_PATH_REPLIES } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { jetstreamManager } from '@nats-io/jetstream';
import { expect, vi } from 'vitest';
import { BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';

/** The ajv the events package compiles its checks with (its dependency, not this package's). */
const { Ajv } = createRequire(new URL('../../../packages/events/package.json', import.meta.url))(
  'ajv',
) as { Ajv: { prototype: { compile(schema: object): unknown } } };

test('a started authority has its checks compiled: its first admit, settle and relayed events compile nothing', async ({
  nc,
  iso,
  start,
}) => {
  const h = await start(BASE_CONFIG);
  // This process's client parses the replies with checks of its own: compiled before counting.
  for (const parse of CALL_PATH_REPLIES.values()) parse(null);
  const compile = vi.spyOn(Ajv.prototype, 'compile');
  // Compiled on the first call instead, they cost ~0.1 s, and 1-3 s on a loaded box: past the
  // edge's 1 s admit timeout, so the first call after a restart was a 503 (the README tour's).
  const call = miniCall(100, 50);
  const admitted = await h.client.admit(call);
  expect(admitted, JSON.stringify(admitted)).toMatchObject({
    ok: true,
    value: { admitted: true },
  });
  const settled = await h.client.settle({
    reservationId: call.reservationId,
    tenant: call.tenant,
    usage: { promptTokens: 100, completionTokens: 20 },
  });
  expect(settled).toMatchObject({ ok: true, value: { status: 'settled' } });
  // The relay checks each event it publishes (checkEvent): both on the stream.
  const jsm = await jetstreamManager(nc);
  await waitFor(
    async () => (await jsm.streams.info(iso.names.eventsStream)).state.messages >= 2 || undefined,
    { timeoutMs: 10_000, what: 'the reservation events on the stream' },
  );
  expect(compile).not.toHaveBeenCalled();
});

import { infraTest as test, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { admissionOf, BASE_CONFIG, newId, onPrivateRedis } from './harness.js';

const call = () => ({
  reservationId: newId(),
  tenant: 'support-bot',
  keyId: null,
  useCase: 'UC-101',
  model: 'gpt-4o-mini',
  promptTokens: 10,
  maxTokens: 10,
});

test('when Redis does not answer the authority refuses with a coded error, never admits blindly', async ({
  nc,
  natsUrl,
  iso,
}) => {
  const { server, h, admin } = await onPrivateRedis({ nc, natsUrl, iso });
  try {
    admissionOf(await h.client.admit(call()));

    // Redis hangs: the command times out (1 s) and the reply is an error, not an admission.
    await admin.call('CLIENT', 'PAUSE', '2500', 'ALL');
    const paused = await h.client.admit(call());
    expect(paused).toMatchObject({ ok: false, error: { code: 'budget_store_unavailable' } });

    // It recovers by itself once Redis answers again.
    await waitFor(async () => (await h.client.admit(call())).ok, {
      timeoutMs: 10_000,
      what: 'admissions after the pause',
    });

    // Redis is gone: refused at once.
    admin.disconnect();
    await server.stop();
    const down = await h.client.admit(call());
    expect(down).toMatchObject({ ok: false, error: { code: 'budget_store_unavailable' } });
    expect(
      await h.client.settle({
        reservationId: newId(),
        tenant: 'support-bot',
        usage: { promptTokens: 1, completionTokens: 1 },
      }),
    ).toMatchObject({
      ok: false,
      error: { code: 'budget_store_unavailable' },
    });
    // The config is in Redis too: reading or applying it is the same retryable error, not
    // `internal` (a bug's code).
    const unavailable = { ok: false, error: { code: 'budget_store_unavailable' } };
    expect(await h.client.configGet()).toMatchObject(unavailable);
    expect(
      await h.client.configApply({ document: BASE_CONFIG, source: 'test', mode: 'merge' }),
    ).toMatchObject(unavailable);
  } finally {
    await h.stop();
    admin.disconnect();
    await server.stop();
  }
});

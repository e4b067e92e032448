import { describe, expect } from 'vitest';
import { waitFor } from '@holdfast/testkit';
import { BASE_CONFIG, newId, readEvents, refusalOf, authorityTest as test } from './harness.js';

const call = (over: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant: 'batch-summariser',
  keyId: 'batch-1',
  useCase: 'UC-112',
  model: 'gpt-4o-mini',
  promptTokens: 370,
  maxTokens: 1_024,
  ...over,
});

describe('reserve mode', () => {
  test('admit holds prompt + max_tokens, settle bills the real usage and frees the hold', async ({
    iso,
    nc,
    start,
  }) => {
    const h = await start(BASE_CONFIG);
    const req = call();
    const admitted = await h.client.admit(req);
    expect(admitted).toMatchObject({
      ok: true,
      value: { admitted: true, heldTokens: 1_394, maxTokens: 1_024, duplicate: false },
    });
    // 370 × 0.15 + 1024 × 0.60 = 55.5 + 614.4 = 669.9 micro-USD, rounded up.
    expect(admitted.ok && admitted.value.admitted && admitted.value.heldMicroUsd).toBe(670);
    expect(admitted.ok && admitted.value.windows).toEqual([
      {
        tenant: 'batch-summariser',
        budget: 'month-tokens',
        window: 'month',
        unit: 'tokens',
        limit: 40_000,
        used: 0,
        held: 1_394,
        enforce: true,
      },
    ]);

    const settled = await h.client.settle({
      reservationId: req.reservationId,
      tenant: req.tenant,
      usage: { promptTokens: 370, completionTokens: 200 },
    });
    expect(settled).toMatchObject({
      ok: true,
      value: { status: 'settled', billedTokens: 570, costMicroUsd: 176 },
    });
    expect(settled.ok && settled.value.windows[0]).toMatchObject({ used: 570, held: 0 });

    // A second settle changes nothing.
    const again = await h.client.settle({
      reservationId: req.reservationId,
      tenant: req.tenant,
      usage: { promptTokens: 999, completionTokens: 999 },
    });
    expect(again).toMatchObject({
      ok: true,
      value: { status: 'already_settled', billedTokens: 570 },
    });
    expect(again.ok && again.value.windows[0]).toMatchObject({ used: 570, held: 0 });

    const usage = await h.client.usage({ tenant: 'batch-summariser' });
    expect(usage.ok && usage.value.tenants[0]).toMatchObject({
      inFlight: 0,
      billedTokens: 570,
      billedMicroUsd: 176,
      suspended: false,
    });

    const events = await waitFor(async () => {
      const e = await readEvents(nc, iso.names);
      return e.filter((x) => x.type !== 'config.changed').length === 2 ? e : undefined;
    });
    const types = events.map((e) => e.type);
    expect(types).toEqual(['config.changed', 'reservation.created', 'reservation.settled']);
    expect(events[2]).toMatchObject({
      chargedTokens: 570,
      chargedMicroUsd: 176,
      heldTokens: 1_394,
      outcome: 'completed',
    });
  });

  test('refuses a call whose worst case does not fit, with numbers and Retry-After', async ({
    start,
  }) => {
    const h = await start(BASE_CONFIG);
    // 28 holds of 1,394 = 39,032; the 29th would need 40,426 > 40,000.
    for (let i = 0; i < 28; i++) expect((await h.client.admit(call())).ok).toBe(true);
    const refused = await h.client.admit(call());
    expect(refused).toMatchObject({
      ok: true,
      value: {
        admitted: false,
        code: 'budget_exceeded',
        budget: 'month-tokens',
        level: 'batch-summariser',
        neededTokens: 1_394,
        retryAfterSeconds: 1,
      },
    });
    expect(refusalOf(refused).message).toBe(
      'This call could use up to 1,394 tokens (370 prompt + 1,024 max_tokens) and team batch-summariser has 968 tokens left in its month window; calls in flight hold another 39,032 tokens. Lower max_tokens or raise the budget.',
    );
    // Larger than the whole budget: waiting cannot help.
    const huge = await h.client.admit(
      call({ tenant: 'support-bot', useCase: 'UC-101', promptTokens: 60_000, maxTokens: 100 }),
    );
    expect(huge).toMatchObject({
      ok: true,
      value: { admitted: false, code: 'budget_exceeded', retryAfterSeconds: null },
    });
  });

  test('a retried admit is answered from the first; a late admit after release is refused', async ({
    start,
  }) => {
    const h = await start(BASE_CONFIG);
    const req = call();
    await h.client.admit(req);
    const dup = await h.client.admit(req);
    expect(dup).toMatchObject({
      ok: true,
      value: { admitted: true, duplicate: true, heldTokens: 1_394 },
    });
    const usage = await h.client.usage({ tenant: 'batch-summariser' });
    expect(usage.ok && usage.value.tenants[0]?.windows[0]?.held).toBe(1_394);

    // The edge gave up on an admit (timeout) and released it before the admit arrived.
    const late = call();
    expect(
      await h.client.release({
        reservationId: late.reservationId,
        tenant: late.tenant,
        reason: 'admit_abandoned',
      }),
    ).toMatchObject({
      ok: true,
      value: { status: 'unknown' },
    });
    expect(await h.client.admit(late)).toMatchObject({
      ok: true,
      value: { admitted: false, code: 'reservation_closed' },
    });
  });

  test('release gives the whole hold back and is idempotent; settle after release changes nothing', async ({
    start,
  }) => {
    const h = await start(BASE_CONFIG);
    const req = call();
    await h.client.admit(req);
    const rel = await h.client.release({
      reservationId: req.reservationId,
      tenant: req.tenant,
      reason: 'upstream_error',
    });
    expect(rel).toMatchObject({ ok: true, value: { status: 'released' } });
    expect(rel.ok && rel.value.windows[0]).toMatchObject({ used: 0, held: 0 });
    expect(
      await h.client.release({
        reservationId: req.reservationId,
        tenant: req.tenant,
        reason: 'upstream_error',
      }),
    ).toMatchObject({
      ok: true,
      value: { status: 'already_released' },
    });
    expect(
      await h.client.settle({
        reservationId: req.reservationId,
        tenant: req.tenant,
        usage: { promptTokens: 1, completionTokens: 1 },
      }),
    ).toMatchObject({ ok: true, value: { status: 'already_released', billedTokens: 0 } });
  });

  test('clamps max_tokens to the use case ceiling and enforces the in-flight cap', async ({
    start,
  }) => {
    const config = { ...BASE_CONFIG, tenants: [{ ...BASE_CONFIG.tenants[1], maxInFlight: 2 }] };
    const h = await start(config);
    const a = await h.client.admit(
      call({ tenant: 'support-bot', useCase: 'UC-101', promptTokens: 50, maxTokens: 4_096 }),
    );
    expect(a).toMatchObject({
      ok: true,
      value: { admitted: true, maxTokens: 512, heldTokens: 562 },
    });
    await h.client.admit(
      call({ tenant: 'support-bot', useCase: 'UC-101', promptTokens: 50, maxTokens: 100 }),
    );
    const third = await h.client.admit(
      call({ tenant: 'support-bot', useCase: 'UC-101', promptTokens: 50, maxTokens: 100 }),
    );
    expect(third).toMatchObject({
      ok: true,
      value: { admitted: false, code: 'concurrency_limit', retryAfterSeconds: 1 },
    });
    expect(refusalOf(third).message).toBe(
      'Team support-bot already has 2 calls in flight, its limit of 2. Retry when one finishes.',
    );
  });
});

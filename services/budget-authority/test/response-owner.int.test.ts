import type { HoldfastEvent } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { RESPONSE_OWNER_TTL_MS } from '../src/handlers/close.js';
import { Keys } from '../src/keys.js';
import type { TestAuthority } from '../src/testing.js';
import { stateKeys } from '../src/rebuild.js';
import { admissionOf, BASE_CONFIG, newId, readEvents, authorityTest as test } from './harness.js';

/**
 * A stored Responses response is owned by the tenant whose call stored it (its settle or
 * release names it): only that tenant's admits may continue it (previousResponseId). Every
 * tenant goes through the same upstream account, whose stored responses any id opens.
 */

/** Two teams of one org beside the experiment's teams of their own orgs. */
const CONFIG = {
  ...BASE_CONFIG,
  tenants: [
    ...BASE_CONFIG.tenants,
    { id: 'acme', budgets: [{ window: 'month', limit: 1_000_000, unit: 'tokens' }] },
    ...['team-a', 'team-b'].map((id) => ({
      id,
      parent: 'acme',
      budgets: [{ window: 'month', limit: 100_000, unit: 'tokens' }],
      useCases: [{ id: 'UC-1', maxTokens: 512, models: ['gpt-4o-mini'] }],
    })),
  ],
};

const admitOf = (tenant: string, over: Record<string, unknown> = {}) => ({
  reservationId: newId(),
  tenant,
  keyId: null,
  useCase: tenant.startsWith('team-') ? 'UC-1' : 'UC-101',
  model: 'gpt-4o-mini',
  promptTokens: 100,
  maxTokens: 100,
  api: 'responses' as const,
  ...over,
});

/** A call of team-a settled with what the upstream stored for it (its response, its items). */
async function storedByTeamA(
  h: TestAuthority,
  stored: { responseId: string; itemIds?: string[] },
): Promise<void> {
  const first = admissionOf(await h.client.admit(admitOf('team-a')));
  const settled = await h.client.settle({
    reservationId: first.reservationId,
    tenant: 'team-a',
    org: first.org,
    usage: { promptTokens: 100, completionTokens: 10 },
    ...stored,
  });
  expect(settled).toMatchObject({ ok: true, value: { status: 'settled' } });
}

/**
 * The events so far, once the release of `reservationId` (the last call let through) is among
 * them: the outbox relay publishes after the reply, so a read right after it may not have that
 * call's events yet, and they would be counted as the refused admits'.
 */
function eventsThrough(read: () => Promise<HoldfastEvent[]>, reservationId: string) {
  return waitFor(
    async () => {
      const all = await read();
      const released = all.some(
        (e) => e.type === 'reservation.released' && e.reservationId === reservationId,
      );
      return released ? all : undefined;
    },
    { what: 'the last release relayed' },
  );
}

/** The refused admits held nothing for the other teams, and recorded no event but releases. */
async function nothingTaken(
  h: TestAuthority,
  events: () => Promise<HoldfastEvent[]>,
  from: number,
) {
  for (const tenant of ['team-b', 'support-bot']) {
    const usage = await h.client.usage({ tenant });
    expect(usage.ok && usage.value.tenants[0]?.inFlight).toBe(0);
    expect(usage.ok && usage.value.tenants[0]?.windows.every((w) => w.held === 0)).toBe(true);
  }
  const after = await events();
  expect(after.slice(from).filter((e) => e.type !== 'reservation.released')).toEqual([]);
}

test("a settle records its response as the tenant's, in its org's slot for 30 days; only that tenant's admits continue it", async ({
  start,
  redis,
  iso,
  nc,
}) => {
  const h = await start(CONFIG);
  await storedByTeamA(h, { responseId: 'resp_abc123' });
  const key = `${iso.keyPrefix}:{acme}:ro:resp_abc123`;
  expect(await redis.get(key)).toBe('team-a');
  const ttl = await redis.pttl(key);
  expect(ttl).toBeGreaterThan(RESPONSE_OWNER_TTL_MS - 60_000);
  expect(ttl).toBeLessThanOrEqual(RESPONSE_OWNER_TTL_MS);

  // The owner continues it.
  const next = admissionOf(
    await h.client.admit(admitOf('team-a', { previousResponseId: 'resp_abc123' })),
  );
  await h.client.release({
    reservationId: next.reservationId,
    tenant: 'team-a',
    reason: 'not_forwarded',
  });
  // A sibling team of the same org, a team of another org, and an id nobody stored: the same
  // answer, nothing held, no refusal recorded; uncounted (before the edge counts it) too.
  const before = await eventsThrough(() => readEvents(nc, iso.names), next.reservationId);
  for (const [tenant, id, uncounted] of [
    ['team-b', 'resp_abc123', false],
    ['support-bot', 'resp_abc123', false],
    ['team-a', 'resp_nobody', false],
    ['team-b', 'resp_abc123', true],
  ] as const) {
    const r = await h.client.admit(
      admitOf(tenant, {
        previousResponseId: id,
        ...(uncounted ? { uncounted, promptTokens: 0 } : {}),
      }),
    );
    expect(r.ok, `${tenant} ${id}`).toBe(false);
    expect(!r.ok && r.error).toMatchObject({
      code: 'response_not_found',
      message: `Previous response with id '${id}' not found.`,
    });
  }
  await nothingTaken(h, () => readEvents(nc, iso.names), before.length);
});

test('a release records the response the upstream stored before the call failed; a malformed id is refused on both requests', async ({
  start,
  redis,
  iso,
}) => {
  const h = await start(CONFIG);
  const a = admissionOf(await h.client.admit(admitOf('support-bot')));
  const released = await h.client.release({
    reservationId: a.reservationId,
    tenant: 'support-bot',
    reason: 'upstream_error',
    responseId: 'resp_failed-1',
    itemIds: ['file_failed-1'],
  });
  expect(released).toMatchObject({ ok: true, value: { status: 'released' } });
  const file = new Keys(iso.keyPrefix).fileOwner('file_failed-1');
  expect(file).toBe(`${iso.keyPrefix}:{_files}:fo:file_failed-1`);
  expect(await redis.get(file)).toBe('support-bot');
  expect(await redis.get(`${iso.keyPrefix}:{support-bot}:ro:resp_failed-1`)).toBe('support-bot');
  admissionOf(
    await h.client.admit(admitOf('support-bot', { previousResponseId: 'resp_failed-1' })),
  );

  for (const bad of ['resp_', 'resp_a:b', 'resp_{x}', 'msg_1', `resp_${'a'.repeat(201)}`]) {
    const admit = await h.client.admit(admitOf('support-bot', { previousResponseId: bad }));
    expect(!admit.ok && admit.error.code, bad).toBe('invalid_request');
    const settle = await h.client.settle({
      reservationId: newId(),
      tenant: 'support-bot',
      usage: { promptTokens: 1, completionTokens: 1 },
      responseId: bad,
    });
    expect(!settle.ok && settle.error.code, bad).toBe('invalid_request');
  }
  const owner = `${iso.keyPrefix}:{support-bot}:ro:resp_failed-1`;
  expect(await redis.keys(`${iso.keyPrefix}:*:ro:*`)).toEqual([owner]);
  // Not budget state: a rebuild from the events (which do not say whose a response is) keeps it.
  const state = await stateKeys(redis, new Keys(iso.keyPrefix));
  expect(state.length).toBeGreaterThan(0);
  expect(state).not.toContain(owner);
  expect(state).not.toContain(file);
});

test("a settle records the output items stored with its response as the tenant's (one pipeline); an admit reading another's item, or an unknown one, by id is refused item_not_found", async ({
  start,
  redis,
  iso,
  nc,
}) => {
  const h = await start(CONFIG);
  await storedByTeamA(h, { responseId: 'resp_items', itemIds: ['msg_a-1', 'rs_a-2', 'fc_a-3'] });
  for (const id of ['resp_items', 'msg_a-1', 'rs_a-2', 'fc_a-3']) {
    const key = `${iso.keyPrefix}:{acme}:ro:${id}`;
    expect(await redis.get(key), id).toBe('team-a');
    expect(await redis.pttl(key)).toBeGreaterThan(RESPONSE_OWNER_TTL_MS - 60_000);
  }

  // The owner reads its items (with its response or without).
  let last = '';
  for (const over of [
    { itemIds: ['msg_a-1', 'rs_a-2'] },
    { itemIds: ['fc_a-3'], previousResponseId: 'resp_items' },
  ]) {
    const next = admissionOf(await h.client.admit(admitOf('team-a', over)));
    await h.client.release({
      reservationId: next.reservationId,
      tenant: 'team-a',
      reason: 'not_forwarded',
    });
    last = next.reservationId;
  }
  const before = await eventsThrough(() => readEvents(nc, iso.names), last);
  for (const [tenant, ids, refused, uncounted] of [
    ['team-b', ['msg_a-1'], 'msg_a-1', false],
    ['support-bot', ['rs_a-2'], 'rs_a-2', false],
    ['team-a', ['msg_a-1', 'msg_nobody'], 'msg_nobody', false],
    ['team-b', ['fc_a-3'], 'fc_a-3', true],
  ] as const) {
    const r = await h.client.admit(
      admitOf(tenant, {
        itemIds: ids,
        ...(uncounted ? { uncounted, promptTokens: 0 } : {}),
      }),
    );
    expect(!r.ok && r.error, `${tenant} ${refused}`).toMatchObject({
      code: 'item_not_found',
      message: `Item with id '${refused}' not found.`,
    });
  }
  // Another's response and another's item: the response is the one named.
  const mixed = await h.client.admit(
    admitOf('team-b', { previousResponseId: 'resp_items', itemIds: ['msg_a-1'] }),
  );
  expect(!mixed.ok && mixed.error.code).toBe('response_not_found');
  await nothingTaken(h, () => readEvents(nc, iso.names), before.length);

  // Malformed ids, too many, an empty list: refused on both requests.
  const bads: string[][] = [
    ['msg_a:b'],
    ['m_1'],
    ['MSG_1'],
    ['msg_{x}'],
    [],
    Array<string>(257).fill('msg_1'),
  ];
  for (const itemIds of bads) {
    const admit = await h.client.admit(admitOf('team-a', { itemIds }));
    expect(!admit.ok && admit.error.code, itemIds[0]).toBe('invalid_request');
    const settle = await h.client.settle({
      reservationId: newId(),
      tenant: 'team-a',
      usage: { promptTokens: 1, completionTokens: 1 },
      itemIds,
    });
    expect(!settle.ok && settle.error.code, itemIds[0]).toBe('invalid_request');
  }
});

/**
 * `owns` answers whether a tenant owns what a count names, as its admit would, and changes
 * nothing: no hold, no refusal, no event, no key; a bad request is refused by name.
 */
test('owns answers as an admit would and changes nothing', async ({ start, redis, iso, nc }) => {
  const h = await start(CONFIG);
  await storedByTeamA(h, { responseId: 'resp_owned1', itemIds: ['rs_item1', 'file_made1'] });
  const mine = { previousResponseId: 'resp_owned1', itemIds: ['rs_item1', 'file_made1'] };
  expect(await h.client.owns({ tenant: 'team-a', ...mine })).toEqual({
    ok: true,
    value: { owned: true },
  });
  // An operator's upload (a file no call made) is every team's, as for an admit.
  const upload = await h.client.owns({ tenant: 'team-b', itemIds: ['file_upload1'] });
  expect(upload).toEqual({ ok: true, value: { owned: true } });

  const last = admissionOf(await h.client.admit(admitOf('team-b')));
  await h.client.release({
    reservationId: last.reservationId,
    tenant: 'team-b',
    reason: 'not_forwarded',
  });
  const before = await eventsThrough(() => readEvents(nc, iso.names), last.reservationId);
  const stateBefore = (await redis.keys(`${iso.keyPrefix}:*`)).sort();
  const named: [string, { previousResponseId?: string; itemIds?: string[] }][] = [
    ['team-b', { previousResponseId: 'resp_owned1' }],
    ['support-bot', { previousResponseId: 'resp_owned1', itemIds: ['rs_item1'] }],
    ['team-a', { previousResponseId: 'resp_nobody' }],
    ['team-b', { itemIds: ['rs_item1'] }],
    ['support-bot', { itemIds: ['file_upload1', 'file_made1'] }],
  ];
  const answers = [];
  for (const [tenant, req] of named) answers.push(await h.client.owns({ tenant, ...req }));
  expect((await redis.keys(`${iso.keyPrefix}:*`)).sort()).toEqual(stateBefore);
  await nothingTaken(h, () => readEvents(nc, iso.names), before.length);
  // The admit's answer, word for word.
  for (const [i, [tenant, req]] of named.entries()) {
    const owns = answers[i]!;
    const admit = await h.client.admit(admitOf(tenant, req));
    expect(owns.ok, `${tenant} ${JSON.stringify(req)}`).toBe(false);
    expect(!owns.ok && { code: owns.error.code, message: owns.error.message }).toEqual(
      !admit.ok && { code: admit.error.code, message: admit.error.message },
    );
  }

  for (const [bad, says] of [
    [{ tenant: 'team-a' }, 'previousResponseId or itemIds'],
    [{ tenant: 'team-a', previousResponseId: 'resp_{x}' }, 'previousResponseId'],
    [{ tenant: 'team-a', itemIds: [] }, 'itemIds'],
    [{ tenant: 'team-a', itemIds: ['rs_a:b'] }, 'itemIds'],
    [{ tenant: 'team-a', itemIds: ['rs_item1'], reservationId: newId() }, 'reservationId'],
    [{ tenant: 'nobody', itemIds: ['rs_item1'] }, 'unknown tenant nobody'],
  ] as const) {
    const r = await h.client.owns(bad as never);
    expect(!r.ok && r.error.code, JSON.stringify(bad)).toBe('invalid_request');
    expect(!r.ok && r.error.message, JSON.stringify(bad)).toContain(says);
  }
});

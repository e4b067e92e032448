import { readEvents, type Isolation } from '@holdfast/testkit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Redis } from 'ioredis';
import { expect } from 'vitest';
import { Keys } from '../src/keys.js';
import type { TestAuthority } from '../src/testing.js';
import { admittedOnDefault, capacityTokens, inOrg as inOrgOf } from './capacity-moves.js';
import { BASE_CONFIG, authorityTest as test, landsBefore } from './harness.js';
import { outboxesRelayed } from './rebuild-activity.js';

/**
 * `capacity.move` asked again, or raced: the hold remembers the upstream it is on now (the
 * first move's `to`), so a move asked again with the same `from` and `to` (the edge timed out
 * on a move the authority completed) answers `moved` and changes nothing, a move whose `from`
 * is not where the hold is now is refused, and two moves of one call to different fallbacks
 * at once take one fallback, not both. The call's close gives back the upstream the hold is on,
 * whatever the edge names. Before, a move after one whose reply was lost named the call's first
 * upstream (the edge never learnt it had left it) and took a second fallback too, a move asked
 * again wrote a second `reservation.moved`, and the close named the first upstream, whose
 * record was gone: the fallback's 500 tokens stayed taken for the rest of the minute.
 */

const declared = (id: string, port: number) => ({
  id,
  baseUrl: `http://127.0.0.1:${port}/v1`,
  capacity: { tokensPerMinute: 10_000 },
});

const config = {
  ...BASE_CONFIG,
  upstreams: [
    { ...BASE_CONFIG.upstreams[0]!, capacity: { tokensPerMinute: 10_000 } },
    declared('backup', 8090),
    declared('spare', 8091),
  ],
  models: BASE_CONFIG.models.map((m) =>
    m.id === 'gpt-4o-mini' ? { ...m, fallbackUpstreams: ['backup', 'spare'] } : m,
  ),
};

const move = (reservationId: string, from: string, to: string) => ({
  reservationId,
  tenant: 'support-bot',
  model: 'gpt-4o-mini',
  from,
  to,
  tokens: 500,
});

/** The `reservation.moved` events, once every outbox is relayed. */
async function movesRecorded(redis: Redis, nc: NatsConnection, iso: Isolation) {
  await outboxesRelayed(redis, new Keys(iso.keyPrefix));
  return (await readEvents(nc, iso.names)).filter((e) => e.type === 'reservation.moved');
}

/** Released as the edge names it: on default, the upstream its admission took (or `upstream`). */
async function releasedOnDefault(
  h: TestAuthority,
  reservationId: string,
  org?: string,
  upstream = 'default',
) {
  const released = await h.client.release({
    reservationId,
    tenant: 'support-bot',
    ...(org === undefined ? {} : { org }),
    upstream,
    model: 'gpt-4o-mini',
    reason: 'upstream_error',
  });
  expect(released.ok && released.value.status).toBe('released');
}

test('a move asked again answers moved and changes nothing; one naming the upstream the call left is refused', async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(config);
  const id = await admittedOnDefault(h);
  const first = await h.client.moveCapacity(move(id, 'default', 'backup'));
  expect(first).toEqual({ ok: true, value: { moved: true } });
  // The edge timed out on it: it asks the same move again.
  const again = await h.client.moveCapacity(move(id, 'default', 'backup'));
  expect(again).toEqual({ ok: true, value: { moved: true } });
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 500, spare: 0 });
  // Or, not knowing the call is on backup now, it moves the call from default to spare.
  const stale = await h.client.moveCapacity(move(id, 'default', 'spare'));
  expect(!stale.ok && stale.error.code).toBe('invalid_request');
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 500, spare: 0 });
  expect(await movesRecorded(redis, nc, iso)).toHaveLength(1);
  // Its close names default (the edge's word): the upstream the hold is on is given back.
  await releasedOnDefault(h, id);
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0, spare: 0 });
});

test('two moves of one call to different fallbacks at once: one takes, the other is refused', async ({
  start,
}) => {
  const h = await start(config);
  for (let i = 0; i < 5; i++) {
    const id = await admittedOnDefault(h);
    const [a, b] = await Promise.all([
      h.client.moveCapacity(move(id, 'default', 'backup')),
      h.client.moveCapacity(move(id, 'default', 'spare')),
    ]);
    const moved = [a, b].filter((r) => r.ok && r.value.moved);
    expect(moved).toHaveLength(1);
    const other = moved[0] === a ? b : a;
    expect(!other.ok && other.error.code).toBe('invalid_request');
  }
  const c = await capacityTokens(h);
  expect(c.default).toBe(0);
  expect((c.backup ?? 0) + (c.spare ?? 0)).toBe(2_500);
});

/** support-bot under `org` (acme or globex: two roots, two slots). */
const inOrg = (org: string) => inOrgOf(config, org);

test("a call of a team moved to another org since its admission moves, in its admission's org", async ({
  start,
  nc,
  redis,
  iso,
}) => {
  const h = await start(inOrg('acme'));
  const id = await admittedOnDefault(h);
  expect((await h.client.configApply({ document: inOrg('globex') })).ok).toBe(true);
  // The edge names the org the admission answered, as its closes do.
  const moved = await h.client.moveCapacity({ ...move(id, 'default', 'backup'), org: 'acme' });
  expect(moved).toEqual({ ok: true, value: { moved: true } });
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 500, spare: 0 });
  expect((await movesRecorded(redis, nc, iso)).map((e) => e.org)).toEqual(['acme']);
  await releasedOnDefault(h, id, 'acme');
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0, spare: 0 });
});

test("a never-moved call's first move naming another upstream than its admission's is refused; its close gives back the admission's", ({
  start,
  nc,
  redis,
  iso,
}) => wrongFromRefused({ start, nc, redis, iso }));

async function wrongFromRefused(o: {
  start: (config: unknown) => Promise<TestAuthority>;
  nc: NatsConnection;
  redis: Redis;
  iso: Isolation;
}) {
  const h = await o.start(config);
  const id = await admittedOnDefault(h);
  // The admission took default; an edge names spare as where the call is.
  const wrong = await h.client.moveCapacity(move(id, 'spare', 'backup'));
  expect(!wrong.ok && wrong.error.code).toBe('invalid_request');
  expect(!wrong.ok && wrong.error.message).toContain('on upstream default now, not spare');
  expect(await capacityTokens(h)).toEqual({ default: 500, backup: 0, spare: 0 });
  expect(await movesRecorded(o.redis, o.nc, o.iso)).toHaveLength(0);
  // Its close, naming spare, gives back default, where the admission took it.
  await releasedOnDefault(h, id, undefined, 'spare');
  expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0, spare: 0 });
}

const capacityOp = (op: string) => (fn: string, args: unknown[]) =>
  fn.startsWith('hf_capacity_') && String(args.at(-1)).includes(`"op":"${op}"`);

/** Where the close lands, and whether the move is recorded (before the close) or refused. */
const steps: [string, (fn: string, args: unknown[]) => boolean, boolean][] = [
  ["before the fallback's take", capacityOp('take'), false],
  [
    'before the move is recorded',
    (fn, args) => fn.startsWith('hf_move_') && args.includes('record'),
    false,
  ],
  ['before the upstream left is given back', capacityOp('release'), true],
];

test.for(steps)(
  "a close landing %s: no upstream keeps the call's take, and a move it beat says so",
  async ([, at, recorded], { start, nc, redis, iso }) => {
    const h = await start(config);
    const id = await admittedOnDefault(h);
    landsBefore(h, at, () => releasedOnDefault(h, id));
    const moved = await h.client.moveCapacity(move(id, 'default', 'backup'));
    expect(await capacityTokens(h)).toEqual({ default: 0, backup: 0, spare: 0 });
    // Recorded before the close (which then gave back the fallback), or refused: a move
    // recorded after the close would put the closed call on the fallback (a rebuild replaying
    // it takes the fallback for a call no close gives back).
    if (recorded) expect(moved).toEqual({ ok: true, value: { moved: true } });
    else expect(!moved.ok && moved.error.message).toContain('released already');
    expect(await movesRecorded(redis, nc, iso)).toHaveLength(recorded ? 1 : 0);
  },
);

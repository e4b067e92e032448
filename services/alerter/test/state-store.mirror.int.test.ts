import { waitFor } from '@holdfast/testkit';
import { Kvm } from '@nats-io/kv';
import { expect, vi } from 'vitest';
import { z } from 'zod';
import { cleanupAfterEach, mirroredStore, alerterTest as test } from './harness.js';

const cleanup = cleanupAfterEach();

const Rec = z.object({ n: z.number() });
const EMPTY = { n: 0 };

test('a mirrored record is decoded once per revision, not on every read of the mirror', async ({
  nc,
  iso,
}) => {
  const { store, bucket } = await mirroredStore(nc, iso.names, cleanup);
  const key = 'win.team-o.month-tokens';
  const parse = vi.spyOn(Rec, 'safeParse');

  const first = await store.compareAndSet(key, { n: 1 }, 0);
  for (let i = 0; i < 3; i++) {
    expect(store.peek(key, Rec, EMPTY)).toEqual({ value: { n: 1 }, revision: first });
  }
  expect(parse).toHaveBeenCalledTimes(1);

  // Another writer's revision comes through the watch, and is decoded once.
  const kv = await new Kvm(nc).open(bucket);
  const second = await kv.put(key, JSON.stringify({ n: 2 }));
  await waitFor(() => store.peek(key, Rec, EMPTY)?.revision === second, { what: 'the watch' });
  expect(store.peek(key, Rec, EMPTY)).toEqual({ value: { n: 2 }, revision: second });
  // A read from the server that finds the revision the mirror holds decodes nothing again.
  expect(await store.read(key, Rec, EMPTY, { fresh: true })).toEqual({
    value: { n: 2 },
    revision: second,
  });
  expect(parse).toHaveBeenCalledTimes(2);

  // Another schema (or another empty value) gets its own decode of the same revision.
  const Other = z.object({ n: z.number(), m: z.number().default(7) });
  expect(store.peek(key, Other, { n: 0, m: 0 })?.value).toEqual({ n: 2, m: 7 });
  expect(store.peek(key, Rec, { n: -1 })?.value).toEqual({ n: 2 });
  // An unreadable record gives the empty value asked for, as before.
  await kv.put(key, JSON.stringify({ n: 'three' }));
  await waitFor(() => store.peek(key, Rec, EMPTY)?.revision !== second, { what: 'the watch' });
  expect(store.peek(key, Rec, EMPTY)?.value).toBe(EMPTY);
});

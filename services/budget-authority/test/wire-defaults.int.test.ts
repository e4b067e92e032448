import { parseEvent } from '@holdfast/events';
import { readStream, waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { admissionOf, BASE_CONFIG, miniCall, authorityTest as test } from './harness.js';

/** Every reservation event on the stream as published: its JSON object, not parsed (issue 14). */
async function published(nc: Parameters<typeof readStream>[0], stream: string) {
  return (await readStream(nc, stream))
    .map((m) => JSON.parse(new TextDecoder().decode(m.data)) as Record<string, unknown>)
    .filter((e) => String(e.type).startsWith('reservation.'));
}

/**
 * The fields a v1 reader fills when absent (zod defaults). Not `serviceTier`: no default fills
 * it (absent is what events from before tiers say), so it stays on the wire, `default` too.
 */
const AT_DEFAULT = [
  'api',
  'cacheWrite5mTokens',
  'cacheWrite1hTokens',
  'reasoningTokens',
  'audioPromptTokens',
  'audioCompletionTokens',
];

test('a chat call at the default tier publishes its events without the fields at their defaults; a reader gets them back', async ({
  start,
  nc,
  iso,
}) => {
  const h = await start(BASE_CONFIG);
  const call = miniCall(30, 512);
  admissionOf(await h.client.admit(call));
  const settled = await h.client.settle({
    reservationId: call.reservationId,
    tenant: call.tenant,
    usage: { promptTokens: 30, completionTokens: 16 },
  });
  expect(settled.ok).toBe(true);

  const events = await waitFor(async () => {
    const e = await published(nc, iso.names.eventsStream);
    return e.length === 2 ? e : undefined;
  });
  for (const e of events) {
    expect(
      Object.keys(e).filter((k) => AT_DEFAULT.includes(k)),
      String(e.type),
    ).toEqual([]);
    const read = parseEvent(JSON.stringify(e));
    if (!read.ok) throw new Error(read.error.message);
    expect(read.value).toMatchObject({ api: 'chat' });
    expect(read.value).toMatchObject({ serviceTier: 'default' });
  }
  const read = parseEvent(JSON.stringify(events[1]));
  if (!read.ok || read.value.type !== 'reservation.settled') throw new Error('not a settle');
  // The settle's counts with defaults, all 0 again.
  const counts = read.value as unknown as Record<string, unknown>;
  for (const key of AT_DEFAULT.slice(2)) expect(counts[key], key).toBe(0);
});

test('fields away from their defaults are published as before', async ({ start, nc, iso }) => {
  const h = await start({
    ...BASE_CONFIG,
    models: BASE_CONFIG.models.map((m) =>
      m.id === 'gpt-4o-mini'
        ? {
            ...m,
            price: {
              ...m.price,
              serviceTiers: { flex: { inputPerMTok: 0.075, outputPerMTok: 0.3 } },
            },
          }
        : m,
    ),
  });
  const call = { ...miniCall(30, 512), api: 'responses' as const, serviceTier: 'flex' };
  admissionOf(await h.client.admit(call));
  await h.client.settle({
    reservationId: call.reservationId,
    tenant: call.tenant,
    usage: { promptTokens: 30, cacheWrite5mTokens: 10, completionTokens: 16, reasoningTokens: 4 },
  });
  const [created, settled] = await waitFor(async () => {
    const e = await published(nc, iso.names.eventsStream);
    return e.length === 2 ? e : undefined;
  });
  expect(created).toMatchObject({ api: 'responses', serviceTier: 'flex' });
  expect(settled).toMatchObject({
    api: 'responses',
    serviceTier: 'flex',
    cacheWrite5mTokens: 10,
    reasoningTokens: 4,
  });
  // Still at 0: left out.
  expect(settled).not.toHaveProperty('cacheWrite1hTokens');
  expect(settled).not.toHaveProperty('audioPromptTokens');
});

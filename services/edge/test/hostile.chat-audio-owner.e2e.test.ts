import type OpenAI from 'openai';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';
import { post, words } from './surfaces.js';

/**
 * Red team, audio replies shared between tenants (found by an audit of the ids a call names).
 * OpenAI keeps an audio reply of Chat Completions (`choices[].message.audio.id`, `audio_...`)
 * for the whole upstream account, and an assistant message brings it back by id (`audio:
 * {id}`): the model reads that audio again. A tenant that learned another's audio id named it
 * and got the other tenant's spoken reply read into its call. An audio reply is now owned by the
 * tenant whose call made it (recorded with the call's settle, as a stored Responses item is),
 * and a call naming one its tenant does not own is answered as for an unknown id, before
 * anything is counted, held or sent.
 */

const A = { authorization: `Bearer ${KEYS.support}` };
const B = { authorization: `Bearer ${KEYS.batch}` };

/** Chat calls that reached the mock upstream. */
const sent = (s: Stack) => s.upstream.stats().requests.chatCompletions;

const spoken = (extra: Record<string, unknown> = {}) =>
  ({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: words(12) }],
    modalities: ['text', 'audio'],
    audio: { voice: 'alloy', format: 'wav' },
    max_tokens: 40,
    ...extra,
  }) as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;

/** A follow-up that brings back an earlier audio reply by its id. */
const replying = (id: string): OpenAI.Chat.ChatCompletionCreateParamsNonStreaming =>
  spoken({
    messages: [
      { role: 'user', content: words(12) },
      { role: 'assistant', audio: { id } },
      { role: 'user', content: 'Say it again.' },
    ],
  });

test("a tenant naming another tenant's audio reply is answered as for an unknown id: nothing counted, held or sent; the owner brings it back", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack({
    patch: (c: TestConfig) => {
      // An earlier audio reply is input only the upstream can size: held at the allowance.
      const model = entry(c.models, 'gpt-4o-mini') as Record<string, unknown>;
      model.upstreamStateAllowanceTokens = 2_000;
    },
  });
  const first = await post(s, '/v1/chat/completions', spoken(), A);
  expect(first.status).toBe(200);
  const [choice] = first.body.choices as { message: { audio?: { id: string } } }[];
  const id = choice!.message.audio!.id;
  expect(id).toMatch(/^audio_/);
  await s.settled('support-bot');
  // Recorded in support-bot's org slot, as a stored Responses item is.
  expect(await redis.get(`${iso.keyPrefix}:{support-bot}:ro:${id}`)).toBe('support-bot');

  const before = sent(s);
  for (const named of [id, 'audio_0123456789abcdef', 'audio_a b', ` ${id}`]) {
    const stolen = await post(s, '/v1/chat/completions', replying(named), B);
    expect(stolen.status).toBe(400);
    expect(stolen.body.error).toEqual({
      message: `Audio with id '${named}' not found.`,
      type: 'invalid_request_error',
      code: 'invalid_request',
      param: 'messages',
    });
  }
  // Streaming, through the official client: the same error, before any chunk.
  const streamed = await s
    .openai(KEYS.batch)
    .chat.completions.create({ ...replying(id), stream: true })
    .catch((e: unknown) => e);
  expect(streamed).toMatchObject({ status: 400, param: 'messages' });
  expect(sent(s)).toBe(before);
  const usageB = await s.settled('batch-summariser');
  expect(usageB.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);

  // Its owner brings it back, streaming too.
  const again = await post(s, '/v1/chat/completions', replying(id), A);
  expect(again.status).toBe(200);
  const stream = await s
    .openai(KEYS.support)
    .chat.completions.create({ ...replying(id), stream: true });
  for await (const _ of stream) void _;
  expect(sent(s)).toBe(before + 2);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length >= 3,
  );
  expect(events.filter((e) => e.type === 'admission.refused')).toEqual([]);
});

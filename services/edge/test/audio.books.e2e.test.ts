import { modelPrices } from '@holdfast/config';
import type OpenAI from 'openai';
import { expect } from 'vitest';
import { expectBooksHold, providerBooks, withAggregator } from './books.js';
import { edgeTest as test, type Stack, type TestConfig } from './harness.js';
import { sha256Hex } from '../src/index.js';
import { chatCall, runQueue, digestMessages } from './workload.js';

/**
 * Audio priced as audio, end to end (edge, authority, Redis, NATS, aggregator, ClickHouse, the
 * mock as the provider): a team with a $0.25 day budget calls an audio model (OpenAI's
 * gpt-4o-audio prices: text $2.50 / $10, audio $40 / $80 per MTok) with `modalities: ["text",
 * "audio"]`, 6 at a time, half of the calls streamed and half with an `input_audio` part,
 * until the budget refuses. The provider's bill at its audio prices never passes the budget,
 * and the ledger, ClickHouse and the provider agree on every audio and text token and to the
 * micro-dollar.
 */
const VOICE = 'voice-agent';
const KEY = 'sk-hf-voice-agent-1';
const MODEL = 'gpt-4o-audio';
const BUDGET_USD = 0.25;
const PRICE = {
  inputPerMTok: 2.5,
  outputPerMTok: 10,
  audioInputPerMTok: 40,
  audioOutputPerMTok: 80,
};
const behaviour = {
  firstTokenLatencyMs: 20,
  completion: { mode: 'uniform' as const, min: 200, max: 700 },
  // Of each reply, up to 150 tokens are audio; the rest is its text (the transcript).
  audioCompletionTokens: 150,
  audioPromptTokensPerPart: 60,
};

function withVoice(c: TestConfig): void {
  c.models.push({ id: MODEL, upstream: 'default', tokenizer: 'o200k_base', price: PRICE });
  c.tenants.push({
    id: VOICE,
    mode: 'reserve',
    budgets: [{ window: 'day', limit: BUDGET_USD, unit: 'usd' }],
    useCases: [{ id: 'talk', maxTokens: 512, models: [MODEL] }],
    keys: [{ id: 'voice-1', sha256: sha256Hex(KEY), defaultUseCase: 'talk' }],
  });
}

/** One spoken turn: a text question, every other call with a short clip (base64 WAV). */
function speak(s: Stack, i: number): Promise<unknown> {
  const [system, user] = digestMessages(i).map((m) => m.content as string);
  const content: OpenAI.Chat.ChatCompletionContentPart[] = [
    { type: 'text', text: user!.slice(0, 400) },
  ];
  if (i % 2 === 1) {
    content.push({
      type: 'input_audio',
      input_audio: { data: 'UklGRiQAAABXQVZF'.repeat(8), format: 'wav' },
    });
  }
  const body = {
    model: MODEL,
    messages: [
      { role: 'system' as const, content: system! },
      { role: 'user' as const, content },
    ],
    modalities: ['text', 'audio'] as ('text' | 'audio')[],
    audio: { voice: 'alloy' as const, format: 'wav' as const },
    max_tokens: 512,
  };
  return chatCall(s.openai(KEY), body, i % 4 >= 2);
}

test('a usd budget holds for audio: the provider at its audio prices never bills over it, and the books agree', async ({
  stack,
  natsUrl,
  clickhouseUrl,
  clickhouse,
  iso,
}) => {
  const s = await stack({ behaviour, patch: withVoice });
  await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
    const run = await runQueue(80, 6, (i) => speak(s, i));
    const records = s.upstream.stats().recent;
    const provider = providerBooks(records, modelPrices(PRICE, 'openai'));
    console.log(
      `[audio] served ${run.served}, refused ${run.refused}; provider billed $${(provider.microUsd / 1e6).toFixed(6)} of $${BUDGET_USD} (audio in ${provider.audioPrompt}, audio out ${provider.audioCompletion} of ${provider.completion} output tokens)`,
    );
    // Both kinds of token on both sides of the call.
    expect(provider.audioPrompt).toBeGreaterThan(0);
    expect(provider.audioCompletion).toBeGreaterThan(0);
    expect(provider.completion).toBeGreaterThan(provider.audioCompletion);
    // Never over the budget as the provider bills audio; the ledger charged exactly audio x
    // audio prices + text x text prices, and ClickHouse has every audio and text token.
    const spent = { tenant: VOICE, api: 'chat' as const, budgetUsd: BUDGET_USD, result: run };
    await expectBooksHold(s, ch, iso.database, spent, provider);
  });
});

test('an audio call whose stream breaks before its usage is billed its hold, never below the provider', async ({
  stack,
}) => {
  const s = await stack({ behaviour, patch: withVoice });
  s.upstream.failNext({ status: 'drop', afterTokens: 100 });
  const broken = s.openai(KEY).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    modalities: ['text', 'audio'],
    audio: { voice: 'alloy', format: 'wav' },
    max_tokens: 400,
  });
  await expect(broken).rejects.toThrow();
  const usage = await s.settled(VOICE);
  const [record] = s.upstream.stats().recent;
  expect(record).toMatchObject({ outcome: 'dropped', audioCompletionTokens: 100 });
  const provider = providerBooks([record!], modelPrices(PRICE, 'openai'));
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  const created = events.find((e) => e.type === 'reservation.created');
  const settled = events.find((e) => e.type === 'reservation.settled');
  // No usage came: the edge cannot count audio, so the admitted output is billed as audio.
  expect(settled).toMatchObject({
    completionTokens: 400,
    audioCompletionTokens: 400,
    costMicroUsd: created?.type === 'reservation.created' ? created.heldMicroUsd : -1,
  });
  expect(usage.billedMicroUsd).toBeGreaterThanOrEqual(provider.microUsd);
  expect(events.some((e) => e.type === 'reservation.overrun')).toBe(false);
});

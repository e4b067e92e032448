import { expect } from 'vitest';
import {
  apiError,
  chat,
  edgeTest as test,
  entry,
  KEYS,
  testConfig,
  type Stack,
  type TestConfig,
} from './harness.js';

/**
 * Holds that grow (docs/budgets.md): in adaptive mode the hold starts at prompt + the recent p95
 * of real output, and the edge extends it as the streamed output reaches its end; when the
 * budget cannot pay for more, the call ends cleanly at length and never bills past its hold.
 */
const adaptive = (limit: number) => (c: TestConfig) => {
  const t = entry(c.tenants, 'batch-summariser');
  t.mode = 'adaptive';
  t.adaptive = { percentile: 0.95, minSamples: 3, samples: 20 };
  t.budgets = [{ window: 'month', limit, unit: 'tokens' }];
};

/** Three calls that each write 50 tokens: afterwards the estimate is 50. */
async function learn(s: Stack) {
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 50 } });
  for (let i = 0; i < 3; i++) {
    await s.openai(KEYS.batch).chat.completions.create({ ...chat(20), max_tokens: 1_024 });
  }
  await s.settled('batch-summariser');
}

/**
 * Learns an estimate of 50, then lowers the budget so that only `room` more output tokens fit
 * after the next call's prompt, and makes the model write 900; returns what was billed so far
 * and the prompt size.
 */
async function squeeze(s: Stack, room: number) {
  await learn(s);
  const learned = (await s.usage('batch-summariser')).billedTokens;
  const prompt = learned / 3 - 50;
  const applied = await s.client.configApply({
    document: testConfig(s.upstream.url, adaptive(learned + prompt + room)),
  });
  expect(applied.ok).toBe(true);
  await s.edge.app.configSnapshot.refresh();
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 900 } });
  return { learned, prompt };
}

test('a hold starts at the estimate and grows with the output; the call bills what it wrote', async ({
  stack,
}) => {
  const s = await stack({ patch: adaptive(40_000) });
  await learn(s);
  s.upstream.configure({ completion: { mode: 'fixed', tokens: 600 } });
  const { data, response } = await s
    .openai(KEYS.batch)
    .chat.completions.create({ ...chat(20), max_tokens: 1_024 })
    .withResponse();
  const prompt = Number(response.headers.get('x-holdfast-prompt-tokens'));
  expect(Number(response.headers.get('x-holdfast-held'))).toBe(prompt + 50);
  expect(data.choices[0]?.finish_reason).toBe('stop');
  expect(data.usage?.completion_tokens).toBe(600);
  const usage = await s.settled('batch-summariser');
  expect(usage.billedTokens).toBe(4 * prompt + 3 * 50 + 600);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 4,
  );
  const grown = events.filter((e) => e.type === 'reservation.extended');
  expect(grown.length).toBeGreaterThan(0);
  const last = grown[grown.length - 1]!;
  expect(last.type === 'reservation.extended' && last.coveredOutputTokens).toBeGreaterThanOrEqual(
    600,
  );
});

test('when the budget cannot cover more output the call ends at length, within its hold (non-streaming)', async ({
  stack,
}) => {
  // 3 × (prompt + 50) learned; room left for roughly 300 more output tokens.
  const s = await stack({ patch: adaptive(40_000) });
  const { learned, prompt } = await squeeze(s, 300);
  const { data, response } = await s
    .openai(KEYS.batch)
    .chat.completions.create({ ...chat(20), max_tokens: 1_024 })
    .withResponse();
  expect(response.headers.get('x-holdfast-ended')).toBe('budget_exhausted');
  expect(data.choices[0]?.finish_reason).toBe('length');
  const written = data.usage?.completion_tokens ?? 0;
  expect(written).toBeGreaterThan(50);
  expect(written).toBeLessThanOrEqual(300);
  const usage = await s.settled('batch-summariser');
  expect(usage.billedTokens).toBe(learned + prompt + written);
  expect(usage.windows[0]!.used).toBeLessThanOrEqual(usage.windows[0]!.limit);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 4,
  );
  expect(events.filter((e) => e.type === 'reservation.settled').at(-1)).toMatchObject({
    outcome: 'budget_exhausted',
  });
});

test('a streaming client gets finish_reason length and a final error event when the hold cannot grow', async ({
  stack,
}) => {
  const s = await stack({ patch: adaptive(40_000) });
  await squeeze(s, 200);
  const stream = await s
    .openai(KEYS.batch)
    .chat.completions.create({ ...chat(20), max_tokens: 1_024, stream: true });
  let finish: string | null | undefined;
  let content = 0;
  const err = await apiError(
    (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) content++;
        if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
      }
    })(),
  );
  expect(finish).toBe('length');
  expect(err.code).toBe('budget_exceeded');
  expect(content).toBeGreaterThan(50);
  expect(content).toBeLessThanOrEqual(200);
  const usage = await s.settled('batch-summariser');
  expect(usage.windows[0]!.used).toBeLessThanOrEqual(usage.windows[0]!.limit);
});

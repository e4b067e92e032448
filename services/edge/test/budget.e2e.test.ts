import { expect } from 'vitest';
import { chat, edgeTest as test, entry, KEYS, type Stack } from './harness.js';
import { digestMessages, runQueue } from './workload.js';

const BUDGET = 40_000;

/**
 * The workload of seeds/000 through the edge: 60 digest calls (about 370 prompt tokens,
 * max_tokens 1,024) from batch-summariser with a 40,000-token month budget, pulled by 16
 * workers, a 429 dropping the item; meanwhile 24 support-bot calls asking for 4,096 tokens.
 * Replies run to 1,024 tokens most of the time (94-97% did in the experiment).
 */
async function digestRun(s: Stack) {
  const batch = s.openai(KEYS.batch);
  const support = s.openai(KEYS.support);
  const [digests, triage] = await Promise.all([
    runQueue(60, 16, (i) =>
      batch.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: digestMessages(i),
        max_tokens: 1_024,
      }),
    ),
    runQueue(24, 4, () => support.chat.completions.create(chat(40, { max_tokens: 4_096 }))),
  ]);
  await s.settled('batch-summariser');
  await s.settled('support-bot');
  const perModel = s.upstream.stats().recent.filter((r) => r.maxTokens === 1_024);
  const billed = perModel.reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
  const mode = (await s.usage('batch-summariser')).mode;
  console.log(
    `[seeds/000 via the edge] ${mode}, 16 workers: provider billed ${billed.toLocaleString('en-US')} of ${BUDGET.toLocaleString('en-US')} (${((billed / BUDGET) * 100).toFixed(1)}%), served ${digests.served}, refused ${digests.refused}`,
  );
  return { digests, triage, billed, ledger: (await s.usage('batch-summariser')).billedTokens };
}

const behaviour = {
  firstTokenLatencyMs: 30,
  completion: { mode: 'uniform' as const, min: 980, max: 1_100 },
};

test('reserve mode: 16 workers never make the provider bill more than the 40,000-token budget', async ({
  stack,
}) => {
  const s = await stack({ behaviour });
  const run = await digestRun(s);
  // Billed as the provider (the mock) counts it, not as Holdfast does.
  expect(run.billed).toBeLessThanOrEqual(BUDGET);
  expect(run.billed).toBeGreaterThan(0.85 * BUDGET);
  expect(run.ledger).toBe(run.billed);
  expect(run.digests.served + run.digests.refused).toBe(60);
  expect(run.digests.codes).toEqual({ budget_exceeded: run.digests.refused });
  // Isolation: the other team is served in full, every call clamped to 512.
  expect(run.triage).toMatchObject({ served: 24, refused: 0 });
  const triage = s.upstream.stats().recent.filter((r) => r.maxTokens !== 1_024);
  expect(triage.map((r) => r.maxTokens)).toEqual(Array(24).fill(512));
  // The digest prompt is about 370 tokens, as in the experiment.
  const prompt = s.upstream.stats().recent.find((r) => r.maxTokens === 1_024)!.promptTokens;
  expect(prompt).toBeGreaterThan(360);
  expect(prompt).toBeLessThan(380);
});

test('post mode (check, bill after): the same workload overshoots the budget', async ({
  stack,
}) => {
  const s = await stack({
    behaviour,
    patch: (c) => (entry(c.tenants, 'batch-summariser').mode = 'post'),
  });
  const run = await digestRun(s);
  expect(run.billed).toBeGreaterThan(BUDGET);
  expect(run.ledger).toBe(run.billed);
});

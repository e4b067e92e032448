/**
 * Prompt counting: inline vs worker pool, per prompt size, and the event-loop delay while a
 * 100k-token prompt is counted each way. Prints figures only; pick the inline threshold from
 * them (DEFAULT_INLINE_MAX_CHARS).
 *
 *   pnpm --filter @holdfast/tokenizer bench       (after `pnpm build`)
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  countChatPrompt,
  loadTokenizer,
  TokenCounter,
  type ChatPromptRequest,
} from '@holdfast/tokenizer';
import { corpus, slicer } from './corpus.js';

const CORPUS = corpus();
const slice = slicer(CORPUS);

/** The next slice of the corpus, about `tokens` tokens long (4 characters a token). */
const text = (tokens: number): string => slice(tokens * 4);

const chat = (tokens: number): ChatPromptRequest => ({
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: 'You summarise documents for a finance team.' },
    { role: 'user', content: text(tokens) },
  ],
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const SIZES = [100, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 64_000, 100_000];
const o200k = await loadTokenizer('o200k_base');
const pool = new TokenCounter({ inlineMaxChars: 0, poolSize: 1 });
await pool.warmUp(['o200k_base']);

console.log('o200k_base, one count at a time, median of runs on distinct texts');
console.log(`corpus: ${CORPUS.length} characters of Markdown`);
console.log('tokens   chars     inline ms  pool ms   inline tokens/ms');
for (const tokens of SIZES) {
  const runs = tokens >= 64_000 ? 5 : 21;
  const inline: number[] = [];
  const pooled: number[] = [];
  let chars = 0;
  let counted = 0;
  for (let i = 0; i < runs; i++) {
    const request = chat(tokens);
    const other = chat(tokens);
    chars = request.messages[1]!.content!.length;
    let t = performance.now();
    counted = countChatPrompt(request, o200k);
    inline.push(performance.now() - t);
    t = performance.now();
    await pool.countChat(other, 'o200k_base');
    pooled.push(performance.now() - t);
  }
  const mi = median(inline);
  console.log(
    `${String(counted).padEnd(8)} ${String(chars).padEnd(9)} ${mi.toFixed(3).padStart(9)}  ${median(pooled).toFixed(3).padStart(7)}   ${Math.round(counted / mi)}`,
  );
}

/** Event-loop delay (ms) observed while `work` runs, sampled every 1 ms. */
async function loopDelay(work: () => Promise<unknown>): Promise<{ max: number; p99: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await new Promise((r) => setTimeout(r, 20));
  await work();
  await new Promise((r) => setTimeout(r, 20));
  h.disable();
  return { max: h.max / 1e6, p99: h.percentile(99) / 1e6 };
}

const big = chat(100_000);
const bigToo = chat(100_000);
const inlineDelay = await loopDelay(() => Promise.resolve(countChatPrompt(big, o200k)));
const poolDelay = await loopDelay(() => pool.countChat(bigToo, 'o200k_base'));
console.log(`\n${countChatPrompt(big, o200k)} and ${countChatPrompt(bigToo, o200k)} tokens`);
console.log('\nevent-loop delay while counting a 100k-token prompt');
console.log(`inline: max ${inlineDelay.max.toFixed(1)} ms, p99 ${inlineDelay.p99.toFixed(1)} ms`);
console.log(`pool:   max ${poolDelay.max.toFixed(1)} ms, p99 ${poolDelay.p99.toFixed(1)} ms`);
await pool.close();

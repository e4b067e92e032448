/**
 * Open-weight families: load time and resident memory of each vocabulary (each in a fresh
 * process), and the latency of counting a 370-token chat (system + user, about 370 o200k tokens)
 * once loaded, against o200k for scale.
 *
 *   pnpm --filter @holdfast/tokenizer bench
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  countChatPrompt,
  FAMILY_NAMES,
  loadTokenizer,
  type ChatPromptRequest,
  type TokenizerName,
} from '@holdfast/tokenizer';

const DOCS = readFileSync(
  fileURLToPath(new URL('../../../docs/budgets.md', import.meta.url)),
  'utf8',
);

/** A chat of about 370 o200k tokens, from a different slice of the docs each time. */
function chat(i: number): ChatPromptRequest {
  const start = (i * 997) % (DOCS.length - 1500);
  return {
    model: 'm',
    messages: [
      { role: 'system', content: 'You summarise documents for a finance team.' },
      { role: 'user', content: DOCS.slice(start, start + 1400) },
    ],
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function measure(name: TokenizerName): Promise<void> {
  global.gc?.();
  const rss0 = process.memoryUsage().rss;
  let t = performance.now();
  const tokenizer = await loadTokenizer(name);
  const loadMs = performance.now() - t;
  global.gc?.();
  const rssMb = (process.memoryUsage().rss - rss0) / 1e6;
  const o200k = await loadTokenizer('o200k_base');
  const times: number[] = [];
  let tokens = 0;
  let openai = 0;
  for (let i = 0; i < 300; i++) {
    const request = chat(i);
    t = performance.now();
    tokens = countChatPrompt(request, tokenizer);
    times.push(performance.now() - t);
    openai = countChatPrompt(request, o200k);
  }
  console.log(
    `${name.padEnd(13)} load ${loadMs.toFixed(0).padStart(5)} ms  rss +${rssMb.toFixed(0).padStart(4)} MB  ` +
      `chat ${tokens} tokens (o200k ${openai}): ${(median(times.slice(20)) * 1000).toFixed(0)} µs median`,
  );
}

const only = process.argv[2] as TokenizerName | undefined;
if (only) await measure(only);
else {
  console.log('each tokenizer in a fresh process (node --expose-gc); chat latency is after load');
  for (const name of ['o200k_base', ...FAMILY_NAMES] as const) {
    const out = execFileSync(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), name],
      { encoding: 'utf8' },
    );
    process.stdout.write(out);
  }
}

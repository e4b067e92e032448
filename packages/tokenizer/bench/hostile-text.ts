/**
 * What text a client chooses costs each tokenizer, a character: 8,000 characters (the inline
 * limit) of English prose against base64, random CJK, words of random letters, a run of spaces
 * and one long word, counted with `countText` (median of distinct texts, ms), then the long
 * word at growing lengths (BPE merges one pre-tokenizer piece in quadratic time).
 *
 *   pnpm build && pnpm --filter @holdfast/tokenizer bench:hostile [o200k_base llama3 ...]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadTokenizer, type TokenizerName } from '@holdfast/tokenizer';
import { slicer } from './corpus.js';

const DOCS = fileURLToPath(new URL('../../../docs', import.meta.url));
const prose = slicer(
  readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .map((f) => readFileSync(join(DOCS, f), 'utf8'))
    .join('\n'),
);
const letters = (n: number) =>
  Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(Math.random() * 26))).join(
    '',
  );
const words = (n: number, length: number) => {
  let text = '';
  while (text.length < n) text += `${letters(length)} `;
  return text.slice(0, n);
};
const cjk = (n: number) => {
  let text = '';
  while (text.length < n) {
    text += String.fromCodePoint(0x4e00 + Math.floor(Math.random() * 20_000));
    if (Math.random() < 0.1) text += ' ';
  }
  return text;
};
const base64 = (n: number) =>
  Buffer.from(Array.from({ length: n }, () => Math.floor(Math.random() * 256)))
    .toString('base64')
    .slice(0, n);

const KINDS: [string, (n: number) => string][] = [
  ['English prose', (n) => prose(n)],
  ['base64', base64],
  ['words of 8 random letters', (n) => words(n, 8)],
  ['random CJK', cjk],
  ['a run of spaces', (n) => `${' '.repeat(n - 1)}${letters(1)}`],
  ['one word', letters],
];

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}

function timed(count: (text: string) => number, make: () => string, runs: number): number {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const text = make();
    const started = performance.now();
    count(text);
    ms.push(performance.now() - started);
  }
  return median(ms);
}

const names = (process.argv.slice(2) as TokenizerName[]).filter(Boolean);
for (const name of names.length > 0 ? names : (['o200k_base', 'llama3'] as TokenizerName[])) {
  const tokenizer = await loadTokenizer(name);
  const count = (text: string) => tokenizer.countText(text);
  console.log(`\n${name}: ms to count 8,000 characters (median of 9 distinct texts)`);
  for (const [kind, make] of KINDS) {
    console.log(`  ${kind.padEnd(28)} ${timed(count, () => make(8_000), 9).toFixed(2)}`);
  }
  console.log(`${name}: one word of n random letters, ms`);
  for (const n of [1_000, 2_000, 4_000, 8_000, 16_000]) {
    console.log(`  ${String(n).padEnd(28)} ${timed(count, () => letters(n), 3).toFixed(1)}`);
  }
}

/**
 * What the `estimate` bound costs: its count over the real count, on English prose (the
 * workspace's Markdown: docs and dependency READMEs) and code (the workspace's TypeScript), for
 * plain text and for a chat of about 370 tokens.
 *
 *   pnpm --filter @holdfast/tokenizer bench
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countChatPrompt, loadTokenizer, type TokenizerName } from '@holdfast/tokenizer';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function files(dir: string, ext: string, out: string[], depth = 0): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    const stat = statSync(path);
    if (stat.isDirectory() && depth < 6) files(path, ext, out, depth + 1);
    else if (name.endsWith(ext)) out.push(path);
  }
  return out;
}

const prose = files(join(ROOT, 'docs'), '.md', [])
  .map((p) => readFileSync(p, 'utf8'))
  .join('\n\n');
const code = [
  ...files(join(ROOT, 'packages'), '.ts', []),
  ...files(join(ROOT, 'services'), '.ts', []),
]
  .map((p) => readFileSync(p, 'utf8'))
  .join('\n\n')
  .slice(0, 2_000_000);

const estimate = await loadTokenizer('estimate');
const names: TokenizerName[] = [
  'o200k_base',
  'cl100k_base',
  'llama3',
  'qwen3',
  'gemma3',
  'mistral_nemo',
];
console.log(`prose ${prose.length} chars, code ${code.length} chars`);
console.log('tokenizer      prose text  code text  370-token chat');
for (const name of names) {
  const tokenizer = await loadTokenizer(name);
  const ratio = (text: string) => estimate.countText(text) / tokenizer.countText(text);
  const chat = {
    model: 'm',
    messages: [
      { role: 'system', content: 'You summarise documents for a finance team.' },
      { role: 'user', content: prose.slice(20_000, 21_400) },
    ],
  };
  const chatRatio = countChatPrompt(chat, estimate) / countChatPrompt(chat, tokenizer);
  console.log(
    `${name.padEnd(14)} ${ratio(prose).toFixed(2).padStart(10)}  ${ratio(code).toFixed(2).padStart(9)}  ${chatRatio.toFixed(2).padStart(14)}`,
  );
}

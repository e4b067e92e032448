/**
 * What the edge holds for an `input_audio` part: o200k_base tokens of its JSON text (the
 * base64 of the clip) per second of audio, for the smallest encodings OpenAI takes, with
 * random bytes (speech) and constant bytes (silence, the fewest tokens). docs/budgets.md
 * ("How audio is priced") compares them with the clip's audio tokens times the price ratio.
 *
 *   pnpm --filter @holdfast/tokenizer bench:audio
 */
import { randomBytes } from 'node:crypto';
import { countChatPrompt, loadTokenizer, type ChatPromptRequest } from '@holdfast/tokenizer';

const tokenizer = await loadTokenizer('o200k_base');
const SECONDS = 10;

/** Prompt tokens a clip adds to a one-line user turn. */
function clipTokens(clip: Buffer, format: string): number {
  const turn = (parts: object[]) =>
    ({
      model: 'gpt-4o-audio-preview',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Answer.' }, ...parts] }],
    }) as unknown as ChatPromptRequest;
  const audio = { type: 'input_audio', input_audio: { data: clip.toString('base64'), format } };
  return countChatPrompt(turn([audio]), tokenizer) - countChatPrompt(turn([]), tokenizer);
}

const ENCODINGS: [name: string, bytesPerSecond: number, format: string][] = [
  ['MP3, 8 kbit/s (MPEG-2.5 layer III, the smallest)', 1_000, 'mp3'],
  ['WAV, 8-bit mono, 8 kHz', 8_000, 'wav'],
  ['WAV, 16-bit mono, 24 kHz', 48_000, 'wav'],
];
for (const [name, perSecond, format] of ENCODINGS) {
  const n = perSecond * SECONDS;
  const perSec = (clip: Buffer) => (clipTokens(clip, format) / SECONDS).toFixed(0);
  console.log(
    `${name}: ${perSecond} B/s; tokens a second: random ${perSec(randomBytes(n))}, ` +
      `zeros ${perSec(Buffer.alloc(n, 0))}, 0x80 ${perSec(Buffer.alloc(n, 0x80))}`,
  );
}

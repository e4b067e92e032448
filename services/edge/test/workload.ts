import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import OpenAI from 'openai';

/** Words that are one o200k token each, so prompt sizes are easy to reason about. */
const WORDS = (
  'account revenue churn pipeline renewal upsell ticket escalation quarter forecast region ' +
  'segment margin invoice contract support usage seats license partner launch risk owner'
).split(' ');

/**
 * The digest prompt of seeds/000: a system line and about 330 words of account notes, about
 * 370 prompt tokens in o200k_base. `i` varies the notes.
 */
export function digestMessages(i: number): OpenAI.Chat.ChatCompletionMessageParam[] {
  const notes = Array.from({ length: 328 }, (_, k) => WORDS[(k * 7 + i * 13) % WORDS.length]);
  return [
    { role: 'system', content: 'You write the weekly account digest for the sales team.' },
    { role: 'user', content: `Account ${i} notes: ${notes.join(' ')}` },
  ];
}

export interface WorkloadResult {
  served: number;
  refused: number;
  /** Refusals by error code. */
  codes: Record<string, number>;
}

/**
 * `calls` requests pulled from one queue by `workers` workers; a 429 drops the item (no retry),
 * as in the experiment's load generator. Calls may use either official client.
 */
export async function runQueue(
  calls: number,
  workers: number,
  call: (i: number) => Promise<unknown>,
): Promise<WorkloadResult> {
  const result: WorkloadResult = { served: 0, refused: 0, codes: {} };
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = next++; i < calls; i = next++) {
        try {
          await call(i);
          result.served++;
        } catch (err) {
          const apiError = err instanceof OpenAI.APIError || err instanceof AnthropicError;
          if (!apiError || err.status !== 429) throw err;
          result.refused++;
          // OpenAI's body carries the code; Anthropic's names it in the message and the header.
          const headers = err.headers as Headers | undefined;
          const code = headers?.get('x-holdfast-error-code') ?? 'none';
          result.codes[code] = (result.codes[code] ?? 0) + 1;
        }
      }
    }),
  );
  return result;
}

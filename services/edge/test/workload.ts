import { APIError as AnthropicError } from '@anthropic-ai/sdk';
import type Anthropic from '@anthropic-ai/sdk';
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
  /** Calls made again after a 503 (the gateway could not decide in time; nothing was held). */
  retried: number;
}

/** How often one item is made again after a 503 before the run fails. */
const RETRIES_503 = 3;

/**
 * `calls` requests pulled from one queue by `workers` workers; a 429 drops the item (no retry),
 * as in the experiment's load generator, or, with `refused`, after the item was made again that
 * many times `delayMs` apart (a client that waits for the holds of the calls in flight to free
 * up, so the queue is not spent on refusals while they run). A 503 (the budget authority did not
 * answer in time, seen on a starved box; the call was given nothing) is made again after 100 ms,
 * as a batch client does, up to RETRIES_503 times. Calls may use either official client.
 */
export async function runQueue(
  calls: number,
  workers: number,
  call: (i: number) => Promise<unknown>,
  refused: { retries: number; delayMs: number } = { retries: 0, delayMs: 0 },
): Promise<WorkloadResult> {
  const result: WorkloadResult = { served: 0, refused: 0, codes: {}, retried: 0 };
  /** One item: served, or the code of its 429 (a 503 made again first; anything else throws). */
  const attempt = async (i: number): Promise<string | undefined> => {
    for (let tries = 0, refusals = 0; ; tries++) {
      try {
        await call(i);
        return undefined;
      } catch (err) {
        const apiError = err instanceof OpenAI.APIError || err instanceof AnthropicError;
        if (apiError && err.status === 503 && tries < RETRIES_503) {
          result.retried++;
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        if (apiError && err.status === 429 && refusals++ < refused.retries) {
          await new Promise((r) => setTimeout(r, refused.delayMs));
          continue;
        }
        if (!apiError || err.status !== 429) throw err;
        // OpenAI's body carries the code; Anthropic's names it in the message and the header.
        const headers = err.headers as Headers | undefined;
        return headers?.get('x-holdfast-error-code') ?? 'none';
      }
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = next++; i < calls; i = next++) {
        const code = await attempt(i);
        if (code === undefined) {
          result.served++;
        } else {
          result.refused++;
          result.codes[code] = (result.codes[code] ?? 0) + 1;
        }
      }
    }),
  );
  return result;
}

/**
 * One Chat Completions call as a client makes it: the whole completion, or (`stream`) a
 * stream with the usage chunk, read to its end.
 */
export async function chatCall(
  openai: OpenAI,
  body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
  stream: boolean,
): Promise<void> {
  if (!stream) {
    await openai.chat.completions.create(body);
    return;
  }
  const events = await openai.chat.completions.create({
    ...body,
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const _ of events);
}

/** One Messages call as a client makes it: the whole message, or (`stream`) its final one. */
export async function messagesCall(
  client: Anthropic,
  body: Anthropic.MessageCreateParamsNonStreaming,
  stream: boolean,
): Promise<void> {
  if (stream) await client.messages.stream(body).finalMessage();
  else await client.messages.create(body);
}

/** One Responses call as a client makes it: the whole response, or (`stream`) read to its end. */
export async function responsesCall(
  openai: OpenAI,
  body: OpenAI.Responses.ResponseCreateParamsNonStreaming,
  stream: boolean,
): Promise<void> {
  if (!stream) {
    await openai.responses.create(body);
    return;
  }
  const events = await openai.responses.create({ ...body, stream: true });
  for await (const _ of events);
}

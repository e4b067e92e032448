import OpenAI from 'openai';

/** Words that are one o200k token each, so prompt sizes are easy to reason about. */
const NOTES = (
  'account revenue churn pipeline renewal upsell ticket escalation quarter forecast region ' +
  'segment margin invoice contract support usage seats license partner launch risk owner'
).split(' ');

type Messages = OpenAI.Chat.ChatCompletionMessageParam[];

/** Digest `i` of seeds/000: a system line and ~330 words of account notes, ~370 prompt tokens. */
export function digestMessages(i: number): Messages {
  const notes = Array.from({ length: 328 }, (_, k) => NOTES[(k * 7 + i * 13) % NOTES.length]);
  return [
    { role: 'system', content: 'You write the weekly account digest for the sales team.' },
    { role: 'user', content: `Account ${i} notes: ${notes.join(' ')}` },
  ];
}

/** Triage call `i`: a short support ticket (~40 prompt tokens). */
export function triageMessages(i: number): Messages {
  return [
    { role: 'system', content: 'Classify the ticket: billing, bug, access or other. One line.' },
    {
      role: 'user',
      content: `Ticket ${i}: the customer cannot open last month's invoice after the seats change and asks whether the renewal quote is still valid.`,
    },
  ];
}

export interface CallOutcome {
  ok: boolean;
  /** HTTP status (200 when served). */
  status: number;
  /** Holdfast's error code for a refusal (`budget_exceeded`, ...). */
  code: string | undefined;
  /** The prompt as Holdfast counted it (`x-holdfast-prompt-tokens`). */
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  retryAfterSeconds: number | undefined;
  /** false when the edge says waiting cannot help (`x-should-retry: false`). */
  shouldRetry: boolean;
}

/** One chat call; a refusal or error comes back as a value, never thrown. */
export async function call(
  client: OpenAI,
  messages: Messages,
  maxTokens: number,
  headers: Record<string, string> = {},
): Promise<CallOutcome> {
  try {
    const { data, response } = await client.chat.completions
      .create({ model: EXPERIMENT_MODEL, messages, max_tokens: maxTokens }, { headers })
      .withResponse();
    const prompt = response.headers.get('x-holdfast-prompt-tokens');
    return {
      ok: true,
      status: response.status,
      code: undefined,
      promptTokens: prompt === null ? undefined : Number(prompt),
      completionTokens: data.usage?.completion_tokens,
      retryAfterSeconds: undefined,
      shouldRetry: false,
    };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError) || err.status === undefined) throw err;
    const headers = err.headers as Headers | undefined;
    const retryAfter = headers?.get('retry-after');
    return {
      ok: false,
      status: err.status,
      code: typeof err.code === 'string' ? err.code : undefined,
      promptTokens: undefined,
      completionTokens: undefined,
      retryAfterSeconds: retryAfter ? Number(retryAfter) : undefined,
      shouldRetry: headers?.get('x-should-retry') !== 'false',
    };
  }
}

/** The model id the experiment adds to the config (served by the mock as gpt-4o-mini). */
export const EXPERIMENT_MODEL = 'experiment-gpt-4o-mini';

export interface QueueResult {
  served: number;
  /** Items dropped after a refusal, by code. */
  refused: Record<string, number>;
  /** Refusals a Retry-After client waited out and retried. */
  retries: number;
  prompts: number[];
  completions: number[];
  ms: number;
}

/** Sum of a tally by code. */
export function total(tally: Record<string, number>): number {
  return Object.values(tally).reduce((a, b) => a + b, 0);
}

/**
 * `items` calls pulled from one queue by `workers` workers. A refusal drops the item, as in
 * the seed's load generator; with `honourRetryAfter` a refusal that says when to come back
 * (Retry-After, and not `x-should-retry: false`) is retried after that wait instead.
 */
export async function runQueue(
  items: number,
  workers: number,
  one: (i: number) => Promise<CallOutcome>,
  honourRetryAfter = false,
): Promise<QueueResult> {
  const r: QueueResult = {
    served: 0,
    refused: {},
    retries: 0,
    prompts: [],
    completions: [],
    ms: 0,
  };
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items; i = next++) {
      for (;;) {
        const out = await one(i);
        if (out.ok) {
          r.served++;
          if (out.promptTokens !== undefined) r.prompts.push(out.promptTokens);
          if (out.completionTokens !== undefined) r.completions.push(out.completionTokens);
          break;
        }
        const wait = out.retryAfterSeconds;
        if (honourRetryAfter && out.shouldRetry && wait !== undefined && wait <= 60) {
          r.retries++;
          await new Promise((done) => setTimeout(done, wait * 1_000));
          continue;
        }
        const code = out.code ?? `http_${out.status}`;
        r.refused[code] = (r.refused[code] ?? 0) + 1;
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  r.ms = performance.now() - started;
  return r;
}

import { modelPrices } from '@holdfast/config';
import type OpenAI from 'openai';
import { expect } from 'vitest';
import { expectBooksHold, providerBooks, withAggregator } from './books.js';
import { edgeTest as test, type Stack, type TestConfig } from './harness.js';
import { sha256Hex } from '../src/index.js';
import { runQueue } from './workload.js';

/**
 * An open-weight family counted at the edge (`tokenizer: qwen3`) against an upstream that bills
 * the way vLLM does, end to end (edge, authority, Redis, NATS, aggregator, ClickHouse): the mock
 * renders Qwen 3's chat template with a renderer of its own (not the edge's Jinja), tool-call
 * arguments read by json.loads and printed by json.dumps, and counts it with Qwen 3's
 * vocabulary. A reserve team with a tokens budget sends plain chats, tools with numeric schema
 * fields and conversations whose tool calls carry numbers JavaScript prints otherwise than
 * Python (a 23-digit integer, 1.0, 1e-7), every reply written to its cap so no unused output
 * hides a prompt counted short. Each call's hold covers the prompt the provider billed; no hold
 * is overrun, and the ledger, ClickHouse and the provider agree to the token.
 */
const TEAM = 'open-weight';
const KEY = 'sk-hf-open-weight-1';
const MODEL = 'qwen3-32b';
const PRICE = { inputPerMTok: 0.2, outputPerMTok: 0.6 };
const MAX_TOKENS = 32;
const BUDGET_TOKENS = 30_000;
const behaviour = {
  completion: { mode: 'fraction' as const, fraction: 1 },
  openWeight: { [MODEL]: 'qwen3' as const },
};

function withOpenWeight(c: TestConfig): void {
  c.models.push({ id: MODEL, upstream: 'default', tokenizer: 'qwen3', price: PRICE });
  c.tenants.push({
    id: TEAM,
    mode: 'reserve',
    budgets: [
      { window: 'day', limit: BUDGET_TOKENS, unit: 'tokens' },
      { window: 'day', limit: 10, unit: 'usd' },
    ],
    useCases: [{ id: 'agent', maxTokens: MAX_TOKENS, models: [MODEL] }],
    keys: [{ id: 'ow-1', sha256: sha256Hex(KEY), defaultUseCase: 'agent' }],
  });
}

/** Schema numbers Python prints its own way once read (1e22 arrives as 1e+22, then a float). */
const numbers = {
  steps: { type: 'integer', minimum: 0, exclusiveMaximum: 1e22 },
  speed: { type: 'number', minimum: 0.5, multipleOf: 1e-7, default: 1.5 },
  retries: { type: 'integer', maximum: 2 ** 70, default: 3 },
};
const parameters = { type: 'object', properties: numbers, required: ['steps'] };
const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'move_arm', description: 'Moves the arm.', parameters } },
];

/** Arguments as a client sends them: numbers as text JSON.parse would round or reprint. */
const ARGUMENTS = [
  '{"steps": 12345678901234567890123, "speed": 1.0, "tol": 1e-7}',
  '{"steps":9007199254740993,"speed":100.0,"tol":1E-9,"ratio":0.1}',
  '{"steps": 1e3, "speed": 2.50, "note": "été"}',
];

function body(i: number): OpenAI.Chat.ChatCompletionCreateParamsNonStreaming {
  const ask = { role: 'user' as const, content: `Move the arm for job ${i}, then report.` };
  const kinds: OpenAI.Chat.ChatCompletionMessageParam[][] = [
    [{ role: 'system', content: 'You are a terse robot controller.' }, ask],
    [ask],
    [
      ask,
      {
        role: 'assistant',
        content: i % 2 === 0 ? null : 'Moving.',
        tool_calls: [0, 1].map((k) => ({
          id: `call_${i}_${k}`,
          type: 'function' as const,
          function: { name: 'move_arm', arguments: ARGUMENTS[(i + k) % ARGUMENTS.length]! },
        })),
      },
      { role: 'tool', tool_call_id: `call_${i}_0`, content: 'moved' },
      { role: 'tool', tool_call_id: `call_${i}_1`, content: 'moved again' },
      { role: 'user', content: 'And now?' },
    ],
  ];
  const kind = i % kinds.length;
  return {
    model: MODEL,
    max_tokens: MAX_TOKENS,
    messages: kinds[kind]!,
    ...(kind === 0 ? {} : { tools }),
  };
}

/** Per call: the prompt the edge held, and the prompt the provider billed. */
async function ask(s: Stack, i: number, seen: { held: number; billed: number }[]) {
  const client = s.openai(KEY);
  const { data, response } = await client.chat.completions.create(body(i)).withResponse();
  const held = Number(response.headers.get('x-holdfast-prompt-tokens'));
  seen.push({ held, billed: data.usage!.prompt_tokens });
}

const TITLE =
  'qwen3 counted at the edge holds what a vLLM-billing upstream bills, tool-call numbers too, and the books agree';

test(TITLE, async ({ stack, natsUrl, clickhouseUrl, clickhouse, iso }) => {
  const s = await stack({ behaviour, patch: withOpenWeight });
  await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
    const seen: { held: number; billed: number }[] = [];
    const run = await runQueue(200, 4, (i) => ask(s, i, seen));
    const provider = providerBooks(s.upstream.stats().recent, modelPrices(PRICE, 'openai'));
    const short = seen.filter((c) => c.held < c.billed);
    console.log(
      `[open-weight qwen3] served ${run.served}, refused ${run.refused}; provider billed ` +
        `${provider.prompt + provider.completion} of ${BUDGET_TOKENS} tokens; prompts held short ` +
        `${short.length} (${JSON.stringify(short.slice(0, 3))}), held over ` +
        `${seen.filter((c) => c.held > c.billed).length}`,
    );
    expect(short).toEqual([]);
    const spent = {
      tenant: TEAM,
      api: 'chat' as const,
      budgetUsd: 10,
      budgetTokens: BUDGET_TOKENS,
      result: run,
    };
    await expectBooksHold(s, ch, iso.database, spent, provider);
  });
});

import Anthropic, { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { APIError as OpenAIError } from 'openai';
import type { TenantUsage } from '@holdfast/events';
import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import {
  entry,
  UNREAD_AT_HANGUP,
  UPSTREAM_TIMEOUT_MS,
  type Stack,
  type TestConfig,
} from './harness.js';
import { CLAUDE } from './rich-bodies.js';

/** The Claude model of the surface tests: on an `anthropic` upstream (the mock's Messages API). */
export { CLAUDE };

/**
 * Adds an `anthropic` upstream (the default one's mock, which speaks both APIs) and a Claude model
 * counted with the upstream's count_tokens, allowed in batch-summariser's and support-bot's use
 * cases. Prices as Anthropic's: cache reads 0.1x, writes 1.25x (5 min) and 2x (1 h) input.
 */
export function withClaude(c: TestConfig): void {
  const upstreamUrl = entry(c.upstreams, 'default').baseUrl;
  c.upstreams.push({
    id: 'claude',
    api: 'anthropic',
    baseUrl: upstreamUrl,
    timeoutMs: UPSTREAM_TIMEOUT_MS,
    maxRetries: 2,
  });
  c.models.push({
    id: CLAUDE,
    upstream: 'claude',
    tokenizer: 'upstream',
    maxOutputTokens: 8_192,
    price: { inputPerMTok: 3, outputPerMTok: 15, cachedInputPerMTok: 0.3 },
  });
  for (const [tenant, useCase] of [
    ['batch-summariser', 'UC-112'],
    ['support-bot', 'UC-101'],
  ] as const) {
    const uc = entry(
      entry(c.tenants, tenant).useCases as { id: string; models: string[] }[],
      useCase,
    );
    uc.models.push(CLAUDE);
  }
}

/** The official Anthropic client pointed at the edge (its baseURL has no /v1; no retries). */
export function anthropic(
  s: Stack,
  key: string,
  opts: ConstructorParameters<typeof Anthropic>[0] = {},
): Anthropic {
  return new Anthropic({ baseURL: s.edge.url, apiKey: key, maxRetries: 0, ...opts });
}

/** A Responses body asking about one file (`file_data`: a data URL), `max_output_tokens` 20. */
export function responsesFile(model: string, fileData: string): Record<string, unknown> {
  return {
    model,
    max_output_tokens: 20,
    input: [
      {
        role: 'user',
        content: [
          { type: 'input_text', text: 'Summarise this.' },
          { type: 'input_file', filename: 'a.pdf', file_data: fileData },
        ],
      },
    ],
  };
}

/** A user turn of about `words` o200k tokens. */
export function words(n: number): string {
  return Array.from({ length: n }, (_, i) => (i % 2 ? 'budget' : 'report')).join(' ');
}

/** The error an official client call failed with (either SDK); fails the test when it did not. */
export async function clientError(p: Promise<unknown>): Promise<OpenAIError | AnthropicError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err instanceof OpenAIError || err instanceof AnthropicError) return err;
  throw new Error(`expected an APIError, got ${String(err)}`);
}

/** A raw POST to the edge, JSON in and out. */
export async function post(
  s: Stack,
  path: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(`${s.edge.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    headers: res.headers,
    body: (await res.json()) as Record<string, unknown>,
  };
}

/** A chat completion POSTed with a key, its status and its body as text (a stream's events). */
export async function chatText(
  url: string,
  key: string,
  body: unknown,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/** The tenant holds nothing; the ledger has what the provider (the mock) billed. */
export async function billedAsProvider(s: Stack, tenant: string): Promise<TenantUsage> {
  const usage = await s.settled(tenant);
  const b = s.upstream.stats().billed;
  expect(usage.billedTokens).toBe(b.promptTokens + b.completionTokens);
  return usage;
}

/** A call sent with vendor length fields was answered, they were dropped, the model saw none. */
export async function expectStripped(
  s: Stack,
  r: Awaited<ReturnType<typeof post>>,
  dropped: string,
): Promise<void> {
  expect(r.status).toBe(200);
  expect(r.headers.get('x-holdfast-dropped-fields')).toBe(dropped);
  expect(s.upstream.stats().recent[0]).toMatchObject({
    vendorFields: {},
    maxTokens: 20,
    outputCap: 20,
  });
  await s.settled('support-bot');
}

/** batch-summariser in adaptive mode, learning from its last 20 calls after 3. */
export function adaptiveBatch(c: TestConfig): void {
  const t = entry(c.tenants, 'batch-summariser');
  t.mode = 'adaptive';
  t.adaptive = { percentile: 0.95, minSamples: 3, samples: 20 };
}

/**
 * After 3 learning calls and 1 long one: every hold was extended on this surface, and the
 * long call's hold started at its prompt plus the learned 50.
 */
export async function expectGrown(s: Stack, api: 'responses' | 'messages'): Promise<void> {
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 4,
  );
  const grown = events.filter((e) => e.type === 'reservation.extended');
  expect(grown.length).toBeGreaterThan(0);
  expect(grown.every((e) => e.api === api)).toBe(true);
  const created = events.filter((e) => e.type === 'reservation.created').at(-1);
  expect(created?.type === 'reservation.created' && created.heldTokens - created.promptTokens).toBe(
    50,
  );
}

/** A model still generating when its client leaves: 400 tokens, 20 ms apart. */
export const GENERATING = { tokenDelayMs: 20, completion: { mode: 'fixed', tokens: 400 } } as const;

/** A model that writes 12 tokens of its 400, then stalls (until its client leaves). */
export const STALLS = {
  behaviour: { tokenDelayMs: 5, completion: { mode: 'fixed', tokens: 400 } },
  fail: { status: 'hang', afterTokens: 12 },
} as const;

/**
 * The next call's model stalls after 12 tokens, and `leave` (its client) leaves once it has
 * them all: billed to the token (expectAbortBilled, `stalled`).
 */
export async function expectStallBilled(
  s: Stack,
  api: 'responses' | 'messages',
  leave: (deltas: number) => Promise<number>,
): Promise<void> {
  s.upstream.failNext(STALLS.fail);
  const received = await leave(STALLS.fail.afterTokens);
  await expectAbortBilled(s, api, received, { stalled: true });
}

/**
 * A stream the client left after `received` of its tokens: the upstream saw the abort, the
 * tenant holds nothing, the prompt is billed as the provider counted it, and so is every token
 * the edge read: at least what the client received, and all of the provider's bill when the
 * model had stopped writing before the client left (`stalled`). A model still generating
 * writes tokens the edge never reads (those written after the edge hung up and before the
 * model saw it, 2 under load here): the provider bills them, Holdfast cannot
 * (`UNREAD_AT_HANGUP`, docs/budgets.md "What Holdfast cannot see").
 */
export async function expectAbortBilled(
  s: Stack,
  api: 'responses' | 'messages',
  received: number,
  opts: { stalled?: boolean } = {},
): Promise<void> {
  await waitFor(() => s.upstream.stats().abortedByClient === 1, { what: 'the upstream abort' });
  const usage = await s.settled('support-bot');
  const b = s.upstream.stats().billed;
  const provider = b.promptTokens + b.completionTokens;
  if (opts.stalled) expect(usage.billedTokens).toBe(provider);
  expect(usage.billedTokens).toBeLessThanOrEqual(provider);
  expect(usage.billedTokens).toBeGreaterThanOrEqual(provider - UNREAD_AT_HANGUP);
  expect(usage.billedTokens).toBeGreaterThanOrEqual(b.promptTokens + received);
  expect(b.completionTokens).toBeLessThan(400);
  const events = await s.events((e) => e.some((x) => x.type === 'reservation.settled'));
  expect(events.find((e) => e.type === 'reservation.settled')).toMatchObject({
    api,
    outcome: 'client_disconnected',
    promptTokens: b.promptTokens,
  });
}

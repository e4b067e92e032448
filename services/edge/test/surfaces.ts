import Anthropic, { APIError as AnthropicError } from '@anthropic-ai/sdk';
import { APIError as OpenAIError } from 'openai';
import { entry, type Stack, type TestConfig } from './harness.js';

/** The Claude model of the surface tests: on an `anthropic` upstream (the mock's Messages API). */
export const CLAUDE = 'claude-sonnet-5-5';

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
    timeoutMs: 5_000,
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

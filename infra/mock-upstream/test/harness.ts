import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeEach } from 'vitest';
import { startMockUpstream, type MockUpstream, type MockUpstreamOptions } from '../src/index.js';

/**
 * One mock per test file on a free port, reset before each test, and an official `openai`
 * client pointed at it (no retries unless a test asks for them).
 */
export function useMockUpstream(opts: MockUpstreamOptions = {}): {
  upstream: () => MockUpstream;
  client: (options?: ConstructorParameters<typeof OpenAI>[0]) => OpenAI;
} {
  let upstream: MockUpstream | undefined;
  const started = startMockUpstream({ port: 0, ...opts }).then((u) => (upstream = u));
  beforeEach(async () => {
    await started;
    upstream!.reset();
  });
  afterAll(async () => {
    await (await started).stop();
  });
  return {
    upstream: () => upstream!,
    client: (options) =>
      new OpenAI({
        baseURL: upstream!.url,
        apiKey: opts.apiKey ?? 'sk-test',
        maxRetries: 0,
        ...options,
      }),
  };
}

/** POST/PUT/GET JSON against any route of the mock, with bodies no client would build. */
export async function call(
  upstream: MockUpstream,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown; text: string; headers: Headers }> {
  const origin = upstream.url.replace(/\/v1$/, '');
  const res = await fetch(`${origin}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** The official Anthropic client, unchanged: baseURL without /v1, the key sent as x-api-key. */
export function anthropicClient(
  upstream: MockUpstream,
  options: ConstructorParameters<typeof Anthropic>[0] = {},
): Anthropic {
  return new Anthropic({
    baseURL: upstream.url.replace(/\/v1$/, ''),
    apiKey: 'sk-ant-test',
    maxRetries: 0,
    ...options,
  });
}

import type { UpstreamConfig } from '@holdfast/config';

/** The version of Anthropic's API the edge speaks when the client did not say one. */
const ANTHROPIC_VERSION = '2023-06-01';

/** The upstream's base URL (its `baseUrlEnv` value when that is an http(s) URL), no trailing /. */
export function baseUrl(target: UpstreamConfig, env: NodeJS.ProcessEnv): string {
  const fromEnv = target.baseUrlEnv ? env[target.baseUrlEnv] : undefined;
  const url = fromEnv && /^https?:\/\/[^\s]+$/.test(fromEnv) ? fromEnv : target.baseUrl;
  return url.replace(/\/+$/, '');
}

/** The server root, beside /v1: llama-server's own endpoints, and Anthropic's API root. */
export function rootUrl(target: UpstreamConfig, env: NodeJS.ProcessEnv): string {
  return baseUrl(target, env).replace(/\/v1$/, '');
}

/**
 * What a surface's path is appended to: an `openai` upstream's base URL (ending in /v1, paths
 * like /chat/completions), an `anthropic` upstream's root (paths like /v1/messages).
 */
export function surfaceBase(target: UpstreamConfig, env: NodeJS.ProcessEnv): string {
  return target.api === 'anthropic' ? rootUrl(target, env) : baseUrl(target, env);
}

/**
 * The headers that authenticate the edge to an upstream, with the client's forwarded headers:
 * Anthropic takes its key as `x-api-key` and needs `anthropic-version`; OpenAI-compatible
 * servers take `Authorization: Bearer`. The key never comes from the client.
 */
export function upstreamHeaders(
  target: UpstreamConfig,
  env: NodeJS.ProcessEnv,
  forwarded: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const headers: Record<string, string> = { ...forwarded, 'content-type': 'application/json' };
  const apiKey = target.apiKeyEnv ? env[target.apiKeyEnv] : undefined;
  if (target.api === 'anthropic') {
    headers['anthropic-version'] ??= ANTHROPIC_VERSION;
    if (apiKey) headers['x-api-key'] = apiKey;
  } else if (apiKey) {
    headers.authorization = `Bearer ${apiKey}`;
  }
  return headers;
}

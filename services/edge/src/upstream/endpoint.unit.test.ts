import { Upstream } from '@holdfast/config';
import { expect, test } from 'vitest';
import { surfaceBase, upstreamHeaders } from './endpoint.js';

const env = { KEY: 'sk-up' };

test("an anthropic upstream gets its key as x-api-key, anthropic-version (the client's, else ours), at its root", () => {
  const claude = Upstream.parse({
    id: 'c',
    api: 'anthropic',
    baseUrl: 'http://127.0.0.1:1/v1/',
    apiKeyEnv: 'KEY',
  });
  expect(upstreamHeaders(claude, env)).toEqual({
    'content-type': 'application/json',
    'anthropic-version': '2023-06-01',
    'x-api-key': 'sk-up',
  });
  const forwarded = { 'anthropic-version': '2024-01-01', 'anthropic-beta': 'x' };
  expect(upstreamHeaders(claude, env, forwarded)).toMatchObject({
    ...forwarded,
    'x-api-key': 'sk-up',
  });
  expect(upstreamHeaders(claude, env).authorization).toBeUndefined();
  expect(surfaceBase(claude, env)).toBe('http://127.0.0.1:1');
});

test('an openai upstream gets Bearer, at its base URL; no key configured, no auth header', () => {
  const openai = Upstream.parse({ id: 'o', baseUrl: 'http://127.0.0.1:1/v1', apiKeyEnv: 'KEY' });
  expect(upstreamHeaders(openai, env)).toEqual({
    'content-type': 'application/json',
    authorization: 'Bearer sk-up',
  });
  expect(surfaceBase(openai, env)).toBe('http://127.0.0.1:1/v1');
  expect(upstreamHeaders(Upstream.parse({ id: 'x', baseUrl: 'http://h/v1' }), env)).toEqual({
    'content-type': 'application/json',
  });
});

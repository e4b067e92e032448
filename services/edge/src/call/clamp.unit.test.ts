import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { expect, test } from 'vitest';
import { clampMaxTokens } from './clamp.js';

const cfg = compileConfig(
  HoldfastConfigSchema.parse({
    upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
    models: [
      {
        id: 'small',
        upstream: 'u',
        maxOutputTokens: 300,
        price: { inputPerMTok: 1, outputPerMTok: 1 },
      },
      {
        id: 'big',
        upstream: 'u',
        maxOutputTokens: 16_384,
        price: { inputPerMTok: 1, outputPerMTok: 1 },
      },
    ],
    tenants: [{ id: 't', useCases: [{ id: 'uc', maxTokens: 512, models: ['small', 'big'] }] }],
  }),
);
const tenant = cfg.tenants.get('t')!;

test('max_tokens is clamped to the use case ceiling and the model max, and set when absent', () => {
  const big = cfg.models.get('big');
  expect(clampMaxTokens(4_096, tenant, 'uc', big)).toEqual({
    requested: 4_096,
    ceiling: 512,
    maxTokens: 512,
  });
  expect(clampMaxTokens(100, tenant, 'uc', big)).toEqual({
    requested: 100,
    ceiling: 512,
    maxTokens: 100,
  });
  expect(clampMaxTokens(null, tenant, 'uc', big)).toEqual({
    requested: null,
    ceiling: 512,
    maxTokens: 512,
  });
  expect(clampMaxTokens(null, tenant, 'uc', cfg.models.get('small')).maxTokens).toBe(300);
  // Unknown use case or model: bounded by the protocol limit; the authority refuses it.
  expect(clampMaxTokens(9e9, tenant, 'nope', undefined).maxTokens).toBe(1_000_000);
});

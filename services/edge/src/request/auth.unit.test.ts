import { compileConfig, HoldfastConfigSchema } from '@holdfast/config';
import { describe, expect, test } from 'vitest';
import { authenticate, repeatedHeader, sha256Hex } from './auth.js';

const doc = (trustHeaders: boolean) =>
  compileConfig(
    HoldfastConfigSchema.parse({
      auth: { trustHeaders },
      upstreams: [{ id: 'u', baseUrl: 'http://127.0.0.1:1/v1' }],
      models: [{ id: 'm', upstream: 'u', price: { inputPerMTok: 1, outputPerMTok: 1 } }],
      tenants: [
        {
          id: 'one',
          useCases: [{ id: 'only', maxTokens: 10, models: ['m'] }],
          keys: [{ id: 'k1', sha256: sha256Hex('sk-one') }],
        },
        {
          id: 'two',
          useCases: [
            { id: 'a', maxTokens: 10, models: ['m'] },
            { id: 'b', maxTokens: 10, models: ['m'] },
          ],
          keys: [
            { id: 'k2', sha256: sha256Hex('sk-two') },
            { id: 'k3', sha256: sha256Hex('sk-three'), defaultUseCase: 'b' },
          ],
        },
      ],
    }),
  );

const code = (r: ReturnType<typeof authenticate>) => (r.ok ? 'ok' : r.error.code);
const useCase = (r: ReturnType<typeof authenticate>) => (r.ok ? r.value.useCase : r.error.code);

describe('authenticate', () => {
  const keys = doc(false);
  test('a bearer key, hashed, names the tenant and key', () => {
    const r = authenticate({ authorization: 'Bearer sk-one' }, keys);
    expect(r.ok && { tenant: r.value.tenant.id, keyId: r.value.keyId }).toEqual({
      tenant: 'one',
      keyId: 'k1',
    });
    expect(code(authenticate({ authorization: 'bearer   sk-one' }, keys))).toBe('ok');
  });

  test('no key, an unknown key, or another scheme is invalid_api_key', () => {
    for (const authorization of [
      undefined,
      '',
      'Bearer',
      'Bearer sk-nope',
      'Basic sk-one',
      'Bearer sk-one extra',
    ])
      expect(code(authenticate({ authorization }, keys))).toBe('invalid_api_key');
  });

  test("Anthropic's x-api-key names the key too; a Bearer token wins when both are sent", () => {
    const r = authenticate({ 'x-api-key': 'sk-three' }, keys);
    expect(r.ok && { tenant: r.value.tenant.id, keyId: r.value.keyId }).toEqual({
      tenant: 'two',
      keyId: 'k3',
    });
    const both = authenticate({ authorization: 'Bearer sk-one', 'x-api-key': 'sk-three' }, keys);
    expect(both.ok && both.value.keyId).toBe('k1');
    for (const key of ['', 'sk-nope', 'Bearer sk-one'])
      expect(code(authenticate({ 'x-api-key': key }, keys))).toBe('invalid_api_key');
  });

  test('the use case: header, else the key default, else the only one, else refused', () => {
    expect(useCase(authenticate({ authorization: 'Bearer sk-one' }, keys))).toBe('only');
    expect(useCase(authenticate({ authorization: 'Bearer sk-three' }, keys))).toBe('b');
    expect(
      useCase(authenticate({ authorization: 'Bearer sk-three', 'x-use-case': 'a' }, keys)),
    ).toBe('a');
    expect(useCase(authenticate({ authorization: 'Bearer sk-two' }, keys))).toBe(
      'use_case_not_registered',
    );
    // Well-formed but unknown: left to the authority, which records the refusal.
    expect(
      useCase(authenticate({ authorization: 'Bearer sk-two', 'x-use-case': 'zzz' }, keys)),
    ).toBe('zzz');
    for (const bad of ['', 'a b', 'a\r\nx: y', 'ü', 'x'.repeat(65)])
      expect(
        useCase(authenticate({ authorization: 'Bearer sk-two', 'x-use-case': bad }, keys)),
      ).toBe('use_case_not_registered');
  });

  test('trustHeaders: the tenant comes from x-team and keys are not needed', () => {
    const trust = doc(true);
    const r = authenticate({ 'x-team': 'one' }, trust);
    expect(r.ok && { tenant: r.value.tenant.id, keyId: r.value.keyId }).toEqual({
      tenant: 'one',
      keyId: null,
    });
    for (const team of [undefined, '', 'nobody', 'ONE', 'one ', 'one\r\nx: y'])
      expect(code(authenticate({ 'x-team': team }, trust))).toBe('unknown_tenant');
  });
});

test('a header that says who calls, sent twice in any case, is named; other repeated headers are not', () => {
  expect(
    repeatedHeader(['Authorization', 'Bearer a', 'accept', '*/*', 'authorization', 'Bearer a']),
  ).toMatchObject({
    code: 'invalid_request',
    param: 'authorization',
  });
  expect(repeatedHeader(['X-Holdfast-User', 'alice', 'x-holdfast-user', 'bob'])?.param).toBe(
    'x-holdfast-user',
  );
  expect(
    repeatedHeader(['accept', 'a', 'accept', 'b', 'x-api-key', 'k', 'authorization', 'b']),
  ).toBeUndefined();
});

import { ERROR_HEADER, ERROR_MESSAGE_HEADER } from '@holdfast/events';
import { authoritySubject } from '@holdfast/runtime';
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import { admissionOf, BASE_CONFIG, newId, refusalOf, authorityTest as test } from './harness.js';

const valid = () => ({
  reservationId: newId(),
  tenant: 'batch-summariser',
  keyId: 'batch-1',
  useCase: 'UC-112',
  model: 'gpt-4o-mini',
  promptTokens: 370,
  maxTokens: 1_024,
});

/** Budget state: every key under the prefix except the outboxes, with its content. */
async function snapshot(redis: Redis, prefix: string): Promise<Record<string, unknown>> {
  const keys = (await redis.keys(`${prefix}:*`))
    .filter((k) => !k.endsWith(':outbox') && !k.endsWith(':relay'))
    .sort();
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const type = await redis.type(k);
    out[k] =
      type === 'hash'
        ? await redis.hgetall(k)
        : type === 'zset'
          ? await redis.zrange(k, 0, -1, 'WITHSCORES')
          : type === 'set'
            ? (await redis.smembers(k)).sort()
            : await redis.get(k);
  }
  return out;
}

const ADMIT_CASES: [string, unknown][] = [
  ['empty object', {}],
  ['array body', [valid()]],
  ['null body', null],
  ['string promptTokens', { ...valid(), promptTokens: '370' }],
  ['fractional maxTokens', { ...valid(), maxTokens: 1.5 }],
  ['negative promptTokens', { ...valid(), promptTokens: -1 }],
  ['zero maxTokens', { ...valid(), maxTokens: 0 }],
  ['huge promptTokens', { ...valid(), promptTokens: 1e300 }],
  ['2^53 maxTokens', { ...valid(), maxTokens: 2 ** 53 }],
  ['null tenant', { ...valid(), tenant: null }],
  ['tenant with a dot', { ...valid(), tenant: 'batch.summariser' }],
  ['tenant with a space', { ...valid(), tenant: 'batch summariser' }],
  ['tenant wildcard *', { ...valid(), tenant: '*' }],
  ['tenant wildcard >', { ...valid(), tenant: '>' }],
  ['tenant unicode', { ...valid(), tenant: 'bätch' }],
  ['tenant uppercase', { ...valid(), tenant: 'Batch' }],
  ['tenant 65 chars', { ...valid(), tenant: 'a'.repeat(65) }],
  ['tenant with a Redis hash tag', { ...valid(), tenant: 'a{b}' }],
  ['reservation id not a UUID', { ...valid(), reservationId: 'abc' }],
  ['reservation id with a key separator', { ...valid(), reservationId: `${newId()}:x` }],
  ['key id with a dot', { ...valid(), keyId: 'batch.1' }],
  ['key id as number', { ...valid(), keyId: 7 }],
  ['use case with a space', { ...valid(), useCase: 'UC 112' }],
  ['use case with CRLF', { ...valid(), useCase: 'UC\r\n112' }],
  ['model with a wildcard', { ...valid(), model: 'gpt-*' }],
  ['model with a path', { ...valid(), model: '../../etc/passwd' }],
  ['unknown extra field', { ...valid(), admin: true }],
  ['lease too long', { ...valid(), leaseMs: 10 ** 12 }],
];

describe('bad input gets a coded error and changes nothing', () => {
  test('malformed admit requests', async ({ iso, nc, redis, start }) => {
    const h = await start(BASE_CONFIG);
    admissionOf(await h.client.admit(valid()));
    const before = await snapshot(redis, iso.keyPrefix);
    const subject = authoritySubject(iso.names, 'admit');
    const raw: [string, Uint8Array][] = [
      ['not JSON', new TextEncoder().encode('{"tenant": ')],
      ['binary', new Uint8Array([0xff, 0xfe, 0x00, 0x01])],
      ['NaN literal', new TextEncoder().encode('{"promptTokens": NaN}')],
      ...ADMIT_CASES.map(([name, body]): [string, Uint8Array] => [
        name,
        new TextEncoder().encode(JSON.stringify(body)),
      ]),
    ];
    for (const [name, body] of raw) {
      const reply = await nc.request(subject, body, { timeout: 5_000 });
      expect(reply.headers?.get(ERROR_HEADER), name).toBe('invalid_request');
      expect(reply.headers?.get(ERROR_MESSAGE_HEADER), name).toBeTruthy();
      expect(reply.data.length, name).toBe(0);
    }
    expect(await snapshot(redis, iso.keyPrefix)).toEqual(before);
  });

  test('malformed settle, release, usage and suspend requests', async ({
    iso,
    nc,
    redis,
    start,
  }) => {
    const h = await start(BASE_CONFIG);
    const held = valid();
    admissionOf(await h.client.admit(held));
    const before = await snapshot(redis, iso.keyPrefix);
    const base = { reservationId: held.reservationId, tenant: held.tenant };
    const retry = { ...base, model: held.model, upstream: 'default' };
    const cases: [string, string, unknown][] = [
      [
        'settle',
        'negative completion',
        { ...base, usage: { promptTokens: 1, completionTokens: -5 } },
      ],
      [
        'settle',
        'cached above prompt',
        { ...base, usage: { promptTokens: 1, completionTokens: 1, cachedPromptTokens: 2 } },
      ],
      ['settle', 'huge usage', { ...base, usage: { promptTokens: 1e20, completionTokens: 1 } }],
      ['settle', 'usage as string', { ...base, usage: '100' }],
      [
        'settle',
        'unknown outcome',
        { ...base, usage: { promptTokens: 1, completionTokens: 1 }, outcome: 'whatever' },
      ],
      [
        'settle',
        'unknown tenant',
        { ...base, tenant: 'nobody', usage: { promptTokens: 1, completionTokens: 1 } },
      ],
      ['release', 'unknown reason', { ...base, reason: 'because' }],
      ['release', 'tenant wildcard', { ...base, tenant: '>', reason: 'timeout' }],
      ...[0, -1, 1.5, 101, '2', 1e20].map((n): [string, string, unknown] => [
        'release',
        `answeredRequests ${JSON.stringify(n)}`,
        { ...base, reason: 'upstream_error', answeredRequests: n },
      ]),
      ...(
        [
          ['no upstream', { ...retry, upstream: undefined }],
          ['upstream subject injection', { ...retry, upstream: 'default.>' }],
          ['tenant wildcard', { ...retry, tenant: '*' }],
          ['reservation not a uuid', { ...retry, reservationId: 'res 1' }],
          ['extra field', { ...retry, requests: 5 }],
        ] as const
      ).map(([name, body]): [string, string, unknown] => ['capacity.retry', name, body]),
      ['usage', 'tenant wildcard', { tenant: '*' }],
      ['usage', 'unknown tenant', { tenant: 'nobody' }],
      [
        'suspend',
        'reason too long',
        { tenant: 'support-bot', reason: 'x'.repeat(501), by: 'admin' },
      ],
      ['suspend', 'unknown actor', { tenant: 'support-bot', reason: 'x', by: 'root' }],
      ['resume', 'unknown tenant', { tenant: 'nobody', by: 'admin' }],
    ];
    for (const [op, name, body] of cases) {
      const reply = await nc.request(
        authoritySubject(iso.names, op as 'settle'),
        JSON.stringify(body),
        { timeout: 5_000 },
      );
      expect(reply.headers?.get(ERROR_HEADER), `${op}: ${name}`).toBe('invalid_request');
    }
    expect(await snapshot(redis, iso.keyPrefix)).toEqual(before);
  });

  test('an invalid config is rejected with every bad field named and the old one kept', async ({
    start,
  }) => {
    const h = await start(BASE_CONFIG);
    const bad = {
      ...BASE_CONFIG,
      tenants: [
        { id: 'Bad.Tenant', budgets: [] },
        {
          id: 'ok',
          parent: 'missing',
          budgets: [{ window: 'week', limit: -1 }],
          useCases: [{ id: 'u', maxTokens: 10, models: ['nope'] }],
        },
      ],
    };
    const r = await h.client.configApply({ document: bad });
    expect(r.ok).toBe(false);
    const message = r.ok ? '' : r.error.message;
    expect(r.ok ? '' : r.error.code).toBe('invalid_config');
    for (const field of [
      'tenants[id=Bad.Tenant].id',
      'tenants[id=ok].budgets[week-tokens].window',
      'tenants[id=ok].budgets[week-tokens].limit',
    ])
      expect(message).toContain(field);
    const yaml = await h.client.configApply({ document: 'tenants: [ {id: ' });
    expect(yaml.ok ? '' : yaml.error.message).toContain('not valid YAML');
    // Still the old config: the teams are admitted.
    admissionOf(await h.client.admit(valid()));
    expect(refusalOf(await h.client.admit({ ...valid(), tenant: 'ok' })).code).toBe(
      'unknown_tenant',
    );
  });
});

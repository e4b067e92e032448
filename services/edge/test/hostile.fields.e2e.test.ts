import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS } from './harness.js';
import { BODIES, paths, setAt } from './rich-bodies.js';
import { CLAUDE, withClaude } from './surfaces.js';

/**
 * Red team: every field of a rich, valid request of each surface (tools, tool calls and results,
 * images, schemas, metadata), one at a time, set to each of a set of odd values. Some are
 * refused (400 naming the field), some go through; none may be a 5xx, and no hold may be left.
 * Found a 500 in Messages (a tool_result's content of [null], read as blocks to be counted).
 */

const ODD: unknown[] = [
  null,
  [],
  {},
  '',
  'x'.repeat(20_000),
  -1,
  1.5,
  2 ** 53 + 2,
  1e300,
  true,
  '\ud800',
  [null],
  [{}],
  { type: 'text' },
  '__proto__',
];

test('every field of every surface set to odd values: refused or served, never a 5xx, no hold left', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withClaude(c);
      // Budgets no run reaches, so every case that passes its checks goes through to the model.
      entry(c.tenants, 'support-bot').budgets = [
        { window: 'month', limit: 1e12, unit: 'tokens' },
        { window: 'day', limit: 1e6, unit: 'usd' },
      ];
    },
  });
  const statuses: Record<string, number> = {};
  for (const [url, base] of BODIES) {
    for (const at of paths(base)) {
      for (const value of ODD) {
        const res = await s.edge.app.inject({
          method: 'POST',
          url,
          headers: { authorization: `Bearer ${KEYS.support}`, 'x-api-key': KEYS.support },
          payload: setAt(base, at, value) as object,
        });
        const name = `${url} ${at.join('.')} = ${JSON.stringify(value).slice(0, 20)}`;
        expect(res.statusCode, `${name}: ${res.body.slice(0, 300)}`).toBeLessThan(500);
        statuses[`${url} ${res.statusCode}`] = (statuses[`${url} ${res.statusCode}`] ?? 0) + 1;
      }
    }
  }
  // Both kinds happened on every surface: odd values refused, and odd values served.
  for (const [url] of BODIES) {
    expect(statuses[`${url} 400`], url).toBeGreaterThan(0);
    expect(statuses[`${url} 200`], url).toBeGreaterThan(0);
  }
  const u = await s.settled('support-bot');
  expect(u.windows.every((w) => w.held === 0)).toBe(true);
});

test('odd values in every header the edge reads or forwards: never a 5xx, no hold left; a forwarded header out of its form is a 400 naming it', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withClaude(c);
      entry(c.tenants, 'support-bot').budgets = [{ window: 'month', limit: 1e12, unit: 'tokens' }];
    },
  });
  const values: Array<string | string[]> = [
    '',
    ' ',
    'x'.repeat(5_000),
    '\u0000',
    'é',
    '../..',
    ['a', 'b'],
    '${jndi:ldap://x}',
    'UC-101 ',
    '-1',
    'context-1m-2025-08-07,context-1m-2025-08-07',
  ];
  const headers = [
    'x-use-case',
    'x-holdfast-user',
    'anthropic-version',
    'anthropic-beta',
    'x-team',
    'x-request-id',
    'idempotency-key',
    'x-holdfast-reservation-id',
    'x-api-key',
    'authorization',
    'accept',
    'x-forwarded-for',
  ];
  const calls: Array<[string, object]> = [
    [
      '/v1/chat/completions',
      { model: 'gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
    ],
    ['/v1/messages', { model: CLAUDE, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }],
    ['/v1/messages/count_tokens', { model: CLAUDE, messages: [{ role: 'user', content: 'hi' }] }],
    ['/v1/responses', { model: 'gpt-4o-mini', max_output_tokens: 16, input: 'hi' }],
  ];
  for (const [url, body] of calls) {
    for (const name of headers) {
      for (const value of values) {
        const res = await s.edge.app.inject({
          method: 'POST',
          url,
          headers: { authorization: `Bearer ${KEYS.support}`, [name]: value },
          payload: body,
        });
        const what = `${url} ${name}: ${JSON.stringify(value).slice(0, 20)}`;
        expect(res.statusCode, `${what}: ${res.body.slice(0, 300)}`).toBeLessThan(500);
      }
    }
  }
  // Anthropic's headers are passed on upstream, so each must be in its form (a NUL in one was
  // a 502 after the hold: the upstream request could not be made).
  for (const [name, value] of [
    ['anthropic-version', '2023-06-01\u0000'],
    ['anthropic-version', 'latest'],
    ['anthropic-beta', 'x'.repeat(5_000)],
    ['anthropic-beta', 'a;b'],
  ] as const) {
    for (const [url, body] of calls.filter(([u]) => u.startsWith('/v1/messages'))) {
      const res = await s.edge.app.inject({
        method: 'POST',
        url,
        headers: { 'x-api-key': KEYS.support, [name]: value },
        payload: body,
      });
      expect(res.statusCode, `${url} ${name}`).toBe(400);
      expect(res.body).toContain(`The ${name} header is not in its form`);
    }
  }
  const u = await s.settled('support-bot');
  expect(u.windows.every((w) => w.held === 0)).toBe(true);
});

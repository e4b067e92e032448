import { expect } from 'vitest';
import { edgeTest as test, KEYS } from './harness.js';
import { CLAUDE, post, withClaude } from './surfaces.js';

/**
 * Red team: length and identity fields of the Responses and Messages surfaces out of range or
 * of the wrong type (the chat surface has its fuzz test). Each is a 400 naming the field, and
 * changes nothing: no hold, no bill, no model call.
 */

test('Responses and Messages: bad lengths, thinking budgets and end-user ids are a 400 naming the field; nothing held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const responses = (extra: Record<string, unknown>) =>
    post(
      s,
      '/v1/responses',
      { model: 'gpt-4o-mini', input: 'hi', ...extra },
      { authorization: `Bearer ${KEYS.support}` },
    );
  for (const max of [-1, 0, 15, 1.5, '100', 1e300, { n: 1 }]) {
    const r = await responses({ max_output_tokens: max });
    expect(r.status, JSON.stringify(max)).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'invalid_request', param: 'max_output_tokens' });
  }
  for (const [field, value] of [
    ['user', 'u'.repeat(513)],
    ['safety_identifier', 7],
    ['background', 'yes'],
    ['previous_response_id', ''],
  ] as const) {
    const r = await responses({ [field]: value });
    expect(r.status, field).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'invalid_request', param: field });
  }
  const messages = (extra: Record<string, unknown>) =>
    post(
      s,
      '/v1/messages',
      { model: CLAUDE, messages: [{ role: 'user', content: 'hi' }], ...extra },
      { 'x-api-key': KEYS.support },
    );
  for (const extra of [
    {},
    { max_tokens: 0 },
    { max_tokens: -5 },
    { max_tokens: 2.5 },
    { max_tokens: '100' },
    { max_tokens: 100, thinking: { type: 'enabled', budget_tokens: 0 } },
    { max_tokens: 100, metadata: { user_id: 'u'.repeat(257) } },
    { max_tokens: 100, system: [{ type: 'text', text: 5 }] },
  ]) {
    const r = await messages(extra);
    expect(r.status, JSON.stringify(extra)).toBe(400);
    expect(r.body).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(r.headers.get('x-holdfast-error-code')).toBe('invalid_request');
  }
  // Thinking on a use case whose ceiling (512) is below its smallest budget: said before a hold.
  const thinking = await messages({
    max_tokens: 4_096,
    thinking: { type: 'enabled', budget_tokens: 100_000 },
  });
  expect(thinking.status).toBe(400);
  expect(JSON.stringify(thinking.body)).toContain('1024');
  expect(s.upstream.stats().recent).toHaveLength(0);
  const u = await s.settled('support-bot');
  expect(u.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);
  const events = await s.events();
  expect(events.filter((e) => e.type === 'reservation.created')).toHaveLength(0);
});

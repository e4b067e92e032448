import { expect } from 'vitest';
import { edgeTest as test } from './harness.js';
import { CLAUDE, withClaude, words } from './surfaces.js';

/**
 * `auth.trustHeaders` works on the Responses and Messages surfaces as on chat: behind an auth
 * proxy the tenant comes from `x-team` and no key is needed; an unknown team is a 403 in the
 * surface's own shape and never reaches the model.
 */
const ROUTES = [
  {
    path: '/v1/responses',
    body: { model: 'gpt-4o-mini', input: words(20), max_output_tokens: 50 },
    forbidden: (b: Record<string, unknown>) =>
      expect(b).toMatchObject({ error: { code: 'unknown_tenant', type: 'permission_error' } }),
  },
  {
    path: '/v1/messages',
    body: { model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: words(20) }] },
    forbidden: (b: Record<string, unknown>) =>
      expect(b).toMatchObject({
        type: 'error',
        error: { type: 'permission_error', message: expect.stringMatching(/^unknown_tenant: /) },
      }),
  },
] as const;

test('trustHeaders on /v1/responses and /v1/messages: x-team names the tenant, an unknown one is refused', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      withClaude(c);
      c.auth.trustHeaders = true;
    },
  });
  for (const r of ROUTES) {
    const send = (team: string | undefined) =>
      fetch(`${s.edge.url}${r.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(team ? { 'x-team': team } : {}) },
        body: JSON.stringify(r.body),
      });
    const before = s.upstream.stats().recent.length;
    for (const team of ['nobody', 'Support-Bot', undefined]) {
      const res = await send(team);
      expect(res.status, `${r.path} ${team}`).toBe(403);
      r.forbidden((await res.json()) as Record<string, unknown>);
    }
    expect(s.upstream.stats().recent.length, r.path).toBe(before);
    const ok = await send('support-bot');
    expect(ok.status, r.path).toBe(200);
    await ok.text();
  }
  const settled = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length >= 2,
  );
  const apis = settled.flatMap((e) =>
    e.type === 'reservation.settled' ? [[e.api, e.keyId, e.tenant]] : [],
  );
  expect(apis).toEqual([
    ['responses', null, 'support-bot'],
    ['messages', null, 'support-bot'],
  ]);
});

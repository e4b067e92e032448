import { waitFor } from '@holdfast/testkit';
import { expect } from 'vitest';
import { admin, withAdmin } from './admin.js';
import { apps, APP_A, APP_B } from './apps.js';
import { chat, edgeTest as test, entry, type Stack, type TestConfig } from './harness.js';
import { post } from './surfaces.js';

/**
 * Red team, keys and end users: what a client with a valid key can do to its key's, its end
 * users' and its team's other keys' budgets (ids, concurrency, admin changes mid-call), and the
 * embeddings surface's holds on every failure path.
 */

const EMBED = 'text-embedding-3-small';

/** Team apps with the embeddings model in its use case. */
function appsEmbed(c: TestConfig): void {
  apps(c);
  const uc = (entry(c.tenants, 'apps').useCases as { models: string[] }[])[0]!;
  uc.models.push(EMBED);
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

const window = (u: { windows: { budget: string; used: number; held: number }[] }) => u.windows[0]!;

async function heldNothing(s: Stack, tenant: string): Promise<void> {
  const u = await s.settled(tenant);
  for (const w of [...u.windows, ...u.keys.flatMap((k) => k.windows)]) expect(w.held).toBe(0);
  for (const e of u.endUsers) for (const w of e.windows) expect(w.held).toBe(0);
}

test('embeddings: an upstream 5xx, an upstream timeout and a client that hangs up give the hold back (a timeout bills its prompt once); key, end user and team are billed alike', async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      appsEmbed(c);
      entry(c.upstreams, 'default').timeoutMs = 2_000;
    },
  });
  const embed = (input: unknown, extra: Record<string, unknown> = {}) =>
    post(s, '/v1/embeddings', { model: EMBED, input, user: 'eve', ...extra }, bearer(APP_A));

  // Upstream 500 on every attempt: a 5xx answer, nothing held or billed.
  s.upstream.failNext({ status: 500, count: 10 });
  const failed = await embed(['hello', 'world']);
  expect(failed.status).toBeGreaterThanOrEqual(500);
  await heldNothing(s, 'apps');
  expect((await s.usage('apps')).billedTokens).toBe(0);
  s.upstream.reset();

  // An upstream that never answers: a timeout, nothing held, the prompt (1 token) billed once,
  // as the provider may have read it (api.md).
  s.upstream.failNext({ status: 'hang', count: 3 });
  const timedOut = await embed('hello');
  expect(timedOut.status).toBe(504);
  await heldNothing(s, 'apps');
  const prompt = 1;
  expect((await s.usage('apps')).billedTokens).toBe(prompt);
  s.upstream.reset();

  // A client that hangs up while the upstream is slow.
  s.upstream.configure({ firstTokenLatencyMs: 1_500 });
  const ac = new AbortController();
  const gone = fetch(`${s.edge.url}/v1/embeddings`, {
    method: 'POST',
    headers: { ...bearer(APP_A), 'content-type': 'application/json' },
    body: JSON.stringify({ model: EMBED, input: 'x '.repeat(100), user: 'eve' }),
    signal: ac.signal,
  }).catch(() => null);
  await waitFor(async () => (await s.usage('apps')).inFlight === 1, { what: 'in flight' });
  ac.abort();
  await gone;
  await heldNothing(s, 'apps');
  s.upstream.configure({ firstTokenLatencyMs: 0 });

  // Served: token ids, arrays, dimensions and base64; the same amount on every level.
  for (const [input, extra] of [
    [[1, 2, 3, 100_000], {}],
    [[[5, 6], [7]], { dimensions: 8 }],
    [['a', '', 'b c d'], { encoding_format: 'base64' }],
  ] as const) {
    const r = await embed(input, extra);
    expect(r.status, JSON.stringify(input)).toBe(200);
  }
  const u = await s.settled('apps');
  const billed = s.upstream.stats().billed.promptTokens + prompt;
  expect(billed).toBeGreaterThan(0);
  expect(u.billedTokens).toBe(billed);
  expect(window(u.keys.find((k) => k.id === 'app-a')!).used).toBe(billed);
  expect(window(u.endUsers.find((e) => e.id === 'eve')!).used).toBe(billed);
  await heldNothing(s, 'apps');
});

test('32 calls at once for one end user through two keys never take it past its budget; the key and team windows agree', async ({
  stack,
}) => {
  const s = await stack({ patch: apps, behaviour: { tokenDelayMs: 2 } });
  const results = await Promise.all(
    Array.from({ length: 32 }, (_, i) =>
      post(
        s,
        '/v1/chat/completions',
        chat(20, { max_tokens: 200, ...(i % 2 ? { user: 'carol' } : {}) }),
        i % 2 ? bearer(APP_B) : { ...bearer(APP_A), 'x-holdfast-user': 'carol' },
      ),
    ),
  );
  const served = results.filter((r) => r.status === 200).length;
  expect(served).toBeGreaterThan(0);
  expect(results.every((r) => r.status === 200 || r.status === 429)).toBe(true);
  const u = await s.settled('apps');
  const carol = window(u.endUsers.find((e) => e.id === 'carol')!);
  expect(carol.used).toBeLessThanOrEqual(1_500);
  const b = s.upstream.stats().billed;
  expect(carol.used).toBe(b.promptTokens + b.completionTokens);
  expect(u.billedTokens).toBe(carol.used);
});

for (const change of [
  'deleted',
  'its budget lowered below its use',
  'its budget removed',
] as const) {
  test(`a key ${change} while its call streams: the call is billed to the windows it was held in, nothing stays held`, async ({
    stack,
  }) => {
    const s = await stack(withAdmin({ patch: apps, behaviour: { tokenDelayMs: 20 } }));
    const call = admin(s);
    const stream = await s
      .openai(APP_A)
      .chat.completions.create(
        { ...chat(10), max_tokens: 60, stream: true, stream_options: { include_usage: true } },
        { headers: { 'x-holdfast-user': 'dave' } },
      );
    let changed = false;
    for await (const _ of stream) {
      if (changed) continue;
      changed = true;
      const r =
        change === 'deleted'
          ? await call('DELETE', '/admin/tenants/apps/keys/app-a')
          : await call('PATCH', '/admin/tenants/apps/keys/app-a', {
              budgets:
                change === 'its budget removed'
                  ? []
                  : [{ window: 'day', limit: 5, unit: 'tokens' }],
            });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      await waitFor(() => s.edge.app.configSnapshot.version >= 2, { what: 'the edge on v2' });
    }
    const u = await s.settled('apps');
    const b = s.upstream.stats().billed;
    expect(u.billedTokens).toBe(b.promptTokens + b.completionTokens);
    expect(window(u.endUsers.find((e) => e.id === 'dave')!).used).toBe(u.billedTokens);
    await heldNothing(s, 'apps');
    const next = await post(s, '/v1/chat/completions', chat(10, { max_tokens: 20 }), bearer(APP_A));
    expect(next.status).toBe(
      change === 'deleted' ? 401 : change === 'its budget removed' ? 200 : 429,
    );
  });
}

test("one key naming new end users cannot use up its team's maxEndUsers when it has a maxEndUsers of its own: another key's new end users are still admitted", async ({
  stack,
}) => {
  const s = await stack(
    withAdmin({
      patch: (c) => {
        appsEmbed(c);
        entry(c.tenants, 'apps').maxEndUsers = 4;
      },
    }),
  );
  // The admin gives app-b a cap of its own.
  const patched = await admin(s)('PATCH', '/admin/tenants/apps/keys/app-b', { maxEndUsers: 2 });
  expect(patched.status).toBe(200);
  expect(patched.body.data).toMatchObject({ id: 'app-b', maxEndUsers: 2 });
  await waitFor(() => s.edge.app.configSnapshot.version >= 2, { what: 'the edge on v2' });
  const junk = (i: number) =>
    post(s, '/v1/embeddings', { model: EMBED, input: 'hi', user: `junk-${i}` }, bearer(APP_B));
  // app-b names new end users on calls that are served; one the upstream fails (nothing
  // billed) takes no place: its end user is forgotten when it is released.
  s.upstream.failNext({ status: 500, count: 3 });
  expect((await junk(0)).status).toBe(502);
  await s.settled('apps');
  expect((await junk(1)).status).toBe(200);
  expect((await junk(2)).status).toBe(200);
  const refused = await junk(3);
  expect(refused.status).toBe(429);
  expect(refused.body.error).toMatchObject({ code: 'end_user_limit', type: 'insufficient_quota' });
  expect(JSON.stringify(refused.body)).toContain(
    'Key app-b of team apps has already named 2 end users',
  );
  // Its end users already tracked go on.
  expect((await junk(1)).status).toBe(200);
  // app-a's backend names real users of its own: the team's other two places.
  for (const user of ['real-1', 'real-2']) {
    const real = await post(s, '/v1/chat/completions', chat(10, { max_tokens: 20 }), {
      ...bearer(APP_A),
      'x-holdfast-user': user,
    });
    expect(real.status, JSON.stringify(real.body)).toBe(200);
  }
  // The team is full now: its own limit, as before.
  const teamFull = await post(s, '/v1/chat/completions', chat(10, { max_tokens: 20 }), {
    ...bearer(APP_A),
    'x-holdfast-user': 'real-3',
  });
  expect(teamFull.status).toBe(429);
  expect(JSON.stringify(teamFull.body)).toContain('Team apps already has budgets');
  const u = await s.settled('apps');
  expect(u.endUsers.map((e) => e.id).sort()).toEqual(['junk-1', 'junk-2', 'real-1', 'real-2']);
  const refusal = (await s.events((e) => e.some((x) => x.type === 'admission.refused'))).find(
    (e) => e.type === 'admission.refused',
  );
  expect(refusal).toMatchObject({ code: 'end_user_limit', keyId: 'app-b', scope: 'key' });
});

for (const change of ['removed', 'lowered below its use', 'added'] as const) {
  test(`end-user budgets ${change} while a call of the end user streams: billed where it was held, nothing stays held, the next call sees the new budgets`, async ({
    stack,
    redis,
    iso,
  }) => {
    let patch = (_c: TestConfig) => {};
    const s = await stack({
      patch: (c) => {
        apps(c);
        if (change === 'added') entry(c.tenants, 'apps').endUserBudgets = [];
        patch(c);
      },
      behaviour: { tokenDelayMs: 20 },
    });
    const stream = await s.openai(APP_B).chat.completions.create({
      ...chat(10),
      max_tokens: 60,
      stream: true,
      stream_options: { include_usage: true },
      user: 'erin',
    });
    let changed = false;
    for await (const _ of stream) {
      if (changed) continue;
      changed = true;
      patch = (c) => {
        entry(c.tenants, 'apps').endUserBudgets =
          change === 'removed' ? [] : [{ window: 'day', limit: 5, unit: 'tokens' }];
      };
      await s.applyConfig();
      await waitFor(() => s.edge.app.configSnapshot.version >= 2, { what: 'the edge on v2' });
    }
    const u = await s.settled('apps');
    const b = s.upstream.stats().billed;
    expect(u.billedTokens).toBe(b.promptTokens + b.completionTokens);
    await heldNothing(s, 'apps');
    const erin = u.endUsers.find((e) => e.id === 'erin');
    if (change === 'removed') expect(erin).toBeUndefined();
    else expect(window(erin!).used).toBe(u.billedTokens);
    // Every window of the end user expires 31 days after its call, as admission keeps them
    // (a budget added mid-call: its window was written by the settle alone).
    const windows = await redis.keys(`${iso.keyPrefix}:{apps}:u:apps:erin:w:*`);
    expect(windows).toHaveLength(1);
    for (const k of windows) expect(await redis.pttl(k)).toBeGreaterThan(30 * 86_400_000);
    const next = await post(
      s,
      '/v1/chat/completions',
      chat(10, { max_tokens: 20, user: 'erin' }),
      bearer(APP_B),
    );
    expect(next.status).toBe(change === 'removed' ? 200 : 429);
  });
}

test('embeddings input a provider would refuse is a 400 before anything is held or sent', async ({
  stack,
}) => {
  const s = await stack({ patch: appsEmbed });
  for (const input of [
    [-1],
    [1.5],
    [2 ** 60],
    [],
    [[]],
    [['a']],
    [1, 'a'],
    Array.from({ length: 2_049 }, () => 'a'),
  ]) {
    const r = await post(s, '/v1/embeddings', { model: EMBED, input, user: 'f' }, bearer(APP_A));
    expect(r.status, JSON.stringify(input).slice(0, 40)).toBe(400);
  }
  expect(s.upstream.stats().recent).toHaveLength(0);
  const u = await s.settled('apps');
  expect(u.billedTokens).toBe(0);
  expect(u.endUserCount).toBe(0);
});

test("a key with a budget of 0 is refused every call, on every surface, with nothing held or sent; the team's other key is served", async ({
  stack,
}) => {
  const s = await stack({
    patch: (c) => {
      appsEmbed(c);
      const keys = entry(c.tenants, 'apps').keys as { id: string; budgets: unknown[] }[];
      entry(keys, 'app-a').budgets = [{ window: 'day', limit: 0, unit: 'tokens' }];
    },
  });
  for (const [path, body] of [
    ['/v1/chat/completions', chat(5, { max_tokens: 1 })],
    ['/v1/embeddings', { model: EMBED, input: 'x' }],
  ] as const) {
    const r = await post(s, path, body, bearer(APP_A));
    expect(r.status, path).toBe(429);
    expect(r.body.error).toMatchObject({ code: 'budget_exceeded' });
    expect(JSON.stringify(r.body)).toContain('key app-a of team apps');
    expect(r.headers.get('retry-after')).toBeNull();
  }
  expect(s.upstream.stats().recent).toHaveLength(0);
  expect(
    (await post(s, '/v1/embeddings', { model: EMBED, input: 'x' }, bearer(APP_B))).status,
  ).toBe(200);
  await heldNothing(s, 'apps');
});

test('an empty user field names no one: safety_identifier then names the end user, on chat and Responses', async ({
  stack,
}) => {
  const s = await stack({ patch: apps });
  const chatCall = await post(
    s,
    '/v1/chat/completions',
    chat(5, { max_tokens: 5, user: '', safety_identifier: 'alice' }),
    bearer(APP_B),
  );
  expect(chatCall.status).toBe(200);
  expect(chatCall.headers.get('x-holdfast-remaining-user-day-tokens')).not.toBeNull();
  const responses = await post(
    s,
    '/v1/responses',
    {
      model: 'gpt-4o-mini',
      input: 'hi',
      max_output_tokens: 16,
      user: '',
      safety_identifier: 'alice',
    },
    bearer(APP_B),
  );
  expect(responses.status).toBe(200);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === 2,
  );
  expect(events.filter((e) => e.type === 'reservation.created').map((e) => e.endUser)).toEqual([
    'alice',
    'alice',
  ]);
  const u = await s.settled('apps');
  expect(window(u.endUsers.find((e) => e.id === 'alice')!).used).toBe(u.billedTokens);
});

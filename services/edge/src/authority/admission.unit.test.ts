import { parseConfig } from '@holdfast/config';
import { RpcError } from '@holdfast/runtime';
import { Registry } from 'prom-client';
import { expect, test } from 'vitest';
import type { AuthorityPort } from '../call/ports.js';
import { EdgeMetrics } from '../metrics.js';
import {
  admit,
  beforeUpstreamCount,
  RefusedUncounted,
  refuseUncounted,
  registered,
} from './admission.js';
import type { Holds } from './holds.js';
import type { RefusalMemory } from './refusal-memory.js';

const config = parseConfig({
  upstreams: [{ id: 'openai', baseUrl: 'https://api.openai.com/v1' }],
  models: [{ id: 'gpt-5', upstream: 'openai', price: { inputPerMTok: 1.25, outputPerMTok: 10 } }],
  tenants: [
    {
      id: 'fast',
      budgets: [{ window: 'day', limit: 10, unit: 'usd' }],
      useCases: [{ id: 'chat', maxTokens: 4_096, models: ['gpt-5'] }],
    },
  ],
});
if (!config.ok) throw new Error('test config');
const tenant = config.value.tenants.get('fast')!;

/** Holds that only note the reservations they release. */
const releasing = (released: string[]) =>
  ({
    close: (ref: { reservationId: string }) => {
      released.push(ref.reservationId);
      return Promise.resolve();
    },
  }) as unknown as Holds;

/**
 * An edge admitting a call against an authority that answers `not_priced` with `message`:
 * the edge's answer, what it logged and the reservations it released.
 */
async function admitNotPriced(
  message: string,
  asked: { serviceTier?: string; toolUses?: { web_search: number } },
) {
  const released: string[] = [];
  const authority = {
    admit: () =>
      Promise.resolve({ ok: false as const, error: new RpcError({ code: 'not_priced', message }) }),
  } as unknown as AuthorityPort;
  const holds = releasing(released);
  const logged: unknown[] = [];
  const r = await admit(
    {
      authority,
      holds,
      metrics: new EdgeMetrics(new Registry()),
      logger: { warn: (o: unknown) => logged.push(o), error: (o: unknown) => logged.push(o) },
      timeoutMs: 1_000,
    },
    {
      caller: { tenant, keyId: null, useCase: 'chat', namesUsers: false },
      model: 'gpt-5',
      promptTokens: 10,
      maxTokens: 10,
      extensible: true,
      api: 'chat',
      ...asked,
    },
  );
  return { r, logged, released };
}

/**
 * The authority's answer to a call held at a tier its config does not price (the edge's
 * config is behind an admin change): the client gets the 400 a current edge gives, not a 500.
 * The authority's side (nothing held, no capacity taken) is in the authority's
 * service-tiers.int.test.ts.
 */
test("an authority whose config does not price the call's tier: a 400 naming service_tier", async () => {
  const { r, logged, released } = await admitNotPriced(
    'model gpt-5 has no price for service tier priority (price.serviceTiers)',
    { serviceTier: 'priority' },
  );
  expect(r.ok).toBe(false);
  if (r.ok) return;
  expect(r.error.code).toBe('invalid_request');
  expect(r.error.param).toBe('service_tier');
  expect(r.error.message).toContain('priority');
  // Not an internal error: nothing logged at error level for the operator to chase.
  expect(logged).toEqual([]);
  // The reservation id is released all the same (a tombstone; the authority held nothing).
  expect(released).toHaveLength(1);
});

/**
 * The same for a provider-run tool's fee (price.toolUses) the authority's config does not
 * price: a 400 naming the tools and the field, not service_tier (the authority's side is in
 * tool-fees.int.test.ts).
 */
test("an authority whose config does not price the call's tool uses: a 400 naming tools and price.toolUses", async () => {
  const { r, logged, released } = await admitNotPriced(
    'price.toolUses.web_search: model gpt-5 has no price for web_search uses',
    { toolUses: { web_search: 3 } },
  );
  expect(r.ok).toBe(false);
  if (r.ok) return;
  expect(r.error.code).toBe('invalid_request');
  expect(r.error.param).toBe('tools');
  expect(r.error.message).toContain('price.toolUses.web_search');
  expect(r.error.message).not.toContain('service_tier');
  expect(logged).toEqual([]);
  expect(released).toHaveLength(1);
});

/**
 * A call the edge's config does not register is asked of the authority uncounted (no count,
 * no request to the upstream's counting endpoint). Its answers: a refusal, the client's 403; an
 * authority that registers the call (`not_counted`: this edge is behind), or a bug that
 * admits it: go on and count (the admitted hold released); none at all: the 503 at once (the
 * tenant is not failOpen), not after counting and a second admit that times out too.
 */
test('an unregistered call is asked uncounted: refused as the authority says, else counted as usual', async () => {
  const asked: unknown[] = [];
  const released: string[] = [];
  const answer = (reply: unknown) => {
    const authority = {
      admit: (body: unknown) => {
        asked.push(body);
        return Promise.resolve(reply);
      },
    } as unknown as AuthorityPort;
    const holds = releasing(released);
    return refuseUncounted(
      {
        authority,
        holds,
        metrics: new EdgeMetrics(new Registry()),
        logger: { warn: () => undefined, error: () => undefined },
        timeoutMs: 1_000,
      },
      {
        caller: { tenant, keyId: null, useCase: 'UC-9', namesUsers: false },
        model: 'gpt-5',
        promptTokens: 0,
        maxTokens: 10,
        extensible: true,
        api: 'messages',
      },
    );
  };
  const caller = { tenant, keyId: null, namesUsers: false };
  expect(registered({ ...caller, useCase: 'chat' }, 'gpt-5')).toBe(true);
  expect(registered({ ...caller, useCase: 'chat' }, 'gpt-4o')).toBe(false);
  expect(registered({ ...caller, useCase: 'UC-9' }, 'gpt-5')).toBe(false);

  const refused = await answer({
    ok: true,
    value: {
      admitted: false,
      code: 'use_case_not_registered',
      message: 'Use case "UC-9" is not registered for team fast.',
      retryAfterSeconds: null,
      budget: null,
      level: null,
      neededTokens: 0,
      neededMicroUsd: 0,
      windows: [],
    },
  });
  expect(refused).toMatchObject({ code: 'use_case_not_registered' });
  expect(asked[0]).toMatchObject({ uncounted: true, promptTokens: 0, useCase: 'UC-9' });
  const behind = { ok: false, error: new RpcError({ code: 'not_counted', message: 'count it' }) };
  expect(await answer(behind)).toBeUndefined();
  const down = { ok: false, error: new RpcError({ code: 'timeout', message: 'no reply' }) };
  expect(await answer(down)).toMatchObject({ code: 'budget_authority_unavailable' });
  const admitted = { ok: true, value: { admitted: true, org: 'fast' } };
  expect(await answer(admitted)).toBeUndefined();
  expect(released).toEqual([(asked[3] as { reservationId: string }).reservationId]);
});

/**
 * Before the first request to an upstream's counting, a registered call is asked of the
 * authority uncounted (its prompt taken as 0): refused, it throws the refusal (remembered for
 * its repeats); else it counts. Asked once a call, however many counts it makes.
 */
test('before an upstream count a call is asked uncounted once: refused, it throws; else it counts', async () => {
  const asked: unknown[] = [];
  const remembered: unknown[] = [];
  const deps = (reply: unknown) => ({
    authority: {
      admit: (body: unknown) => {
        asked.push(body);
        return Promise.resolve(reply);
      },
    } as unknown as AuthorityPort,
    holds: releasing([]),
    refusals: {
      closes: () => 0,
      remember: (req: unknown) => remembered.push(req),
    } as unknown as RefusalMemory,
    metrics: new EdgeMetrics(new Registry()),
    logger: { warn: () => undefined, error: () => undefined },
    timeoutMs: 1_000,
  });
  const call = (failOpen: boolean) => ({
    caller: { tenant: { ...tenant, failOpen }, keyId: null, useCase: 'chat', namesUsers: false },
    model: 'gpt-5',
    promptTokens: 0,
    maxTokens: 10,
    extensible: true,
    api: 'messages' as const,
  });
  const over = {
    ok: true,
    value: {
      admitted: false,
      code: 'budget_exceeded',
      message: 'Team fast has 3 tokens left.',
      retryAfterSeconds: 60,
      budget: 'fast-day',
      level: 'fast',
      neededTokens: 10,
      neededMicroUsd: 0,
      windows: [],
    },
  };
  const refused = beforeUpstreamCount(deps(over), call(false));
  const thrown = await refused().catch((err: unknown) => err);
  expect(thrown).toBeInstanceOf(RefusedUncounted);
  expect((thrown as RefusedUncounted).refusal).toMatchObject({ code: 'budget_exceeded' });
  await expect(refused()).rejects.toBeInstanceOf(RefusedUncounted);
  expect(asked).toHaveLength(1);
  expect(asked[0]).toMatchObject({ uncounted: true, promptTokens: 0, useCase: 'chat' });
  expect(remembered).toMatchObject([{ promptTokens: 0, maxTokens: 10 }]);

  const fits = { ok: false, error: new RpcError({ code: 'not_counted', message: 'count it' }) };
  await expect(beforeUpstreamCount(deps(fits), call(false))()).resolves.toBeUndefined();
  const down = { ok: false, error: new RpcError({ code: 'no_responders', message: 'none' }) };
  const closed = await beforeUpstreamCount(deps(down), call(false))().catch((e: unknown) => e);
  expect((closed as RefusedUncounted).refusal).toMatchObject({
    code: 'budget_authority_unavailable',
  });
  // failOpen: counted, and its admit decides (served unmetered when no authority answers)...
  await expect(beforeUpstreamCount(deps(down), call(true))()).resolves.toBeUndefined();
  // ...unless this edge saw it suspended.
  const seen = { ...deps(down), suspended: () => true };
  const suspended = await beforeUpstreamCount(seen, call(true))().catch((e: unknown) => e);
  expect((suspended as RefusedUncounted).refusal).toMatchObject({ code: 'tenant_suspended' });
  // The authority's Redis failing: its admit would fail closed, failOpen or not.
  const store = {
    ok: false,
    error: new RpcError({ code: 'budget_store_unavailable', message: 'redis down' }),
  };
  const failed = await beforeUpstreamCount(deps(store), call(true))().catch((e: unknown) => e);
  expect((failed as RefusedUncounted).refusal).toMatchObject({
    code: 'budget_authority_unavailable',
  });
});

/**
 * Every admit carries the config version this edge serves, so an authority replica that has
 * not loaded it yet (its notice lost or not handled) loads it before deciding
 * (admin-race.int.test.ts): a limit an admin lowered holds on every replica at once.
 */
test('an admit, counted or not, carries the config version the edge serves', async () => {
  const asked: Record<string, unknown>[] = [];
  const authority = {
    admit: (body: Record<string, unknown>) => {
      asked.push(body);
      return Promise.resolve({
        ok: false as const,
        error: new RpcError({ code: 'not_counted', message: 'count it' }),
      });
    },
  } as unknown as AuthorityPort;
  const deps = {
    authority,
    holds: releasing([]),
    metrics: new EdgeMetrics(new Registry()),
    logger: { warn: () => undefined, error: () => undefined },
    timeoutMs: 1_000,
    configVersion: () => 7,
  };
  const req = {
    caller: { tenant, keyId: null, useCase: 'chat', namesUsers: false },
    model: 'gpt-5',
    promptTokens: 10,
    maxTokens: 10,
    extensible: true,
    api: 'chat' as const,
  };
  await admit(deps, req);
  await beforeUpstreamCount(deps, { ...req, promptTokens: 0 })();
  expect(asked.map((b) => b.configVersion)).toEqual([7, 7]);
  // An edge with no config yet (version 0 or unknown) sends none.
  await admit({ ...deps, configVersion: () => 0 }, req);
  expect(asked[2]).not.toHaveProperty('configVersion');
});

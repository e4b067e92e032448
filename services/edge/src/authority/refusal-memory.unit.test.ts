import { parseConfig, type CompiledConfig } from '@holdfast/config';
import { endUserFilterOf, type Refused, type RefusalsReportRequest } from '@holdfast/events';
import { Err, Ok, RpcError, type Result } from '@holdfast/runtime';
import { Registry } from 'prom-client';
import { afterEach, expect, test, vi } from 'vitest';
import { EdgeMetrics } from '../metrics.js';
import type { AdmissionRequest } from './admission.js';
import { RefusalMemory } from './refusal-memory.js';

function compile(limit: number): CompiledConfig {
  const config = parseConfig({
    upstreams: [{ id: 'openai', baseUrl: 'https://api.openai.com/v1' }],
    models: [{ id: 'gpt-5', upstream: 'openai', price: { inputPerMTok: 1.25, outputPerMTok: 10 } }],
    tenants: [
      { id: 'org', budgets: [{ window: 'day', limit: 1_000_000, unit: 'tokens' }] },
      {
        id: 'team',
        parent: 'org',
        budgets: [{ window: 'day', limit, unit: 'tokens' }],
        useCases: [{ id: 'chat', maxTokens: 4_096, models: ['gpt-5'] }],
      },
      {
        id: 'sibling',
        parent: 'org',
        useCases: [{ id: 'chat', maxTokens: 4_096, models: ['gpt-5'] }],
      },
    ],
  });
  if (!config.ok) throw new Error(JSON.stringify(config.error));
  return config.value;
}

const REFUSED: Refused = {
  admitted: false,
  code: 'budget_exceeded',
  message: 'This call could use up to 110 tokens and team team has 5 left in its day window.',
  retryAfterSeconds: 30,
  budget: 'team-day',
  level: 'team',
  neededTokens: 110,
  neededMicroUsd: 0,
  windows: [],
  summary: { kind: 'team|budget_exceeded|x', fields: '["type","admission.refused"]' },
};

/** A refusal of no budget, for which waiting cannot help (a suspension, the config's). */
const levelless = (code: Refused['code']): Refused => ({
  ...REFUSED,
  code,
  retryAfterSeconds: null,
  budget: null,
  level: null,
  summary: { kind: `team|${code}|x`, fields: '["type","admission.refused"]' },
});

/** A window of the refusals below: the team's, or an end user's own. */
const window = (scope?: 'end_user') => ({
  tenant: 'team',
  budget: scope ? 'user-day' : 'team-day',
  window: 'day' as const,
  unit: 'tokens' as const,
  limit: 100,
  used: 95,
  held: 0,
  enforce: true,
  ...(scope ? { scope, subject: 'u1' } : {}),
});

/** Refused by the end user's own budget. */
const USER_REFUSED: Refused = {
  ...REFUSED,
  budget: 'user-day',
  scope: 'end_user',
  windows: [window(), window('end_user')],
};

type Report = (req: RefusalsReportRequest) => Promise<Result<{ recorded: number }, RpcError>>;

function memoryOver(
  report: Report,
  memoryMs = 1_000,
  config = compile(100),
  bounds: { maxEntries?: number; maxPerOrg?: number; maxTrackedBytes?: number } = {},
) {
  const reports: RefusalsReportRequest[] = [];
  const metrics = new EdgeMetrics(new Registry());
  const memory = new RefusalMemory({
    memoryMs,
    reportMs: 5,
    ...bounds,
    authority: {
      reportRefusals: (req) => {
        reports.push(structuredClone(req));
        return report(req);
      },
    },
    config: () => config,
    metrics,
    logger: { warn: () => {}, info: () => {} },
  });
  const call = (over: Partial<AdmissionRequest> = {}, tenant = 'team'): AdmissionRequest => ({
    caller: {
      tenant: config.tenants.get(tenant)!,
      keyId: 'k1',
      useCase: 'chat',
      namesUsers: false,
    },
    model: 'gpt-5',
    promptTokens: 10,
    maxTokens: 100,
    extensible: true,
    api: 'chat',
    ...over,
  });
  const local = async () =>
    (await metrics.localRefusals.get()).values.reduce((n, v) => n + v.value, 0);
  return { memory, reports, call, local };
}

const taken: Report = (req) => Promise.resolve(Ok({ recorded: req.items.length }));

afterEach(() => vi.useRealTimers());

test('a repeat that needs no less is answered with the refusal, once its count is reported', async () => {
  const { memory, reports, call, local } = memoryOver(taken);
  expect(memory.recall(call())).toBeUndefined();
  memory.remember(call(), REFUSED, memory.closes('org'));
  const answers = await Promise.all([
    memory.recall(call()),
    memory.recall(call({ promptTokens: 11 })),
    memory.recall(call({ maxTokens: 200 })),
  ]);
  expect(answers.map((a) => a?.code)).toEqual(Array(3).fill('budget_exceeded'));
  expect(answers[0]!.message).toBe(REFUSED.message);
  // A larger call is told its numbers are a smaller one's.
  expect(answers[1]!.message).toContain('10 prompt tokens and max_tokens 100');
  expect(answers[0]!.retryAfterSeconds).toBeGreaterThanOrEqual(29);
  // One report item for the three: the authority's summary kind and fields, counted 3.
  expect(reports).toHaveLength(1);
  expect(reports[0]!.items).toEqual([
    expect.objectContaining({ tenant: 'team', kind: REFUSED.summary!.kind, count: 3 }),
  ]);
  expect(await local()).toBe(3);
});

test('a call that could need less, or differs in what picks its budgets or prices, asks the authority', () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(call(), REFUSED, 0);
  expect(memory.recall(call({ promptTokens: 9 }))).toBeUndefined();
  expect(memory.recall(call({ maxTokens: 99 }))).toBeUndefined();
  expect(memory.recall(call({ model: 'gpt-4' }))).toBeUndefined();
  expect(memory.recall(call({ api: 'responses' }))).toBeUndefined();
  expect(memory.recall(call({ serviceTier: 'flex' }))).toBeUndefined();
  expect(memory.recall(call({ audioOutput: true }))).toBeUndefined();
  expect(memory.recall(call({ toolUses: { web_search: 1 } }))).toBeUndefined();
  expect(memory.recall(call({}, 'sibling'))).toBeUndefined();
  const other = call();
  other.caller = { ...other.caller, keyId: 'k2' };
  expect(memory.recall(other)).toBeUndefined();
});

test('a use case or model not registered: any repeat naming them is refused whatever closes, until a config is applied', async () => {
  const { memory, call } = memoryOver(taken);
  const notAllowed = levelless('model_not_allowed');
  memory.closing('org', 'team');
  memory.remember(call({ model: 'gpt-9' }), notAllowed, 0);
  memory.closed('org', 'team');
  expect(await memory.recall(call({ model: 'gpt-9', maxTokens: 1, endUser: 'u2' }))).toMatchObject({
    code: 'model_not_allowed',
  });
  // Another made-up name stands for the same (`*`); the answer names it.
  expect(await memory.recall(call({ model: 'gpt-8' }))).toMatchObject({
    message: 'Model "gpt-8" is not allowed for use case "chat" of team team.',
  });
  expect(memory.recall(call())).toBeUndefined();
});

test("a team's budget refusal answers the call whoever its end user, without the end user's windows; an end user's own, that end user only", async () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(
    call({ endUser: 'u1' }),
    { ...REFUSED, windows: [window(), window('end_user')] },
    0,
  );
  expect((await memory.recall(call({ endUser: 'u1' })))?.windows).toHaveLength(2);
  expect((await memory.recall(call({ endUser: 'u2' })))?.windows).toEqual([window()]);
  expect((await memory.recall(call()))?.windows).toEqual([window()]);
  const { memory: own, call: of } = memoryOver(taken);
  own.remember(of({ endUser: 'u1' }), USER_REFUSED, 0);
  expect(own.recall(of({ endUser: 'u1' }))).toBeDefined();
  expect(own.recall(of({ endUser: 'u2' }))).toBeUndefined();
  expect(own.recall(of())).toBeUndefined();
  // The authority says whose budget it was: the team's, though an end user's has its id.
  const { memory: same, call: as } = memoryOver(taken);
  const alike = { ...window('end_user'), budget: 'team-day' };
  same.remember(as({ endUser: 'u1' }), { ...REFUSED, scope: 'tenant', windows: [alike] }, 0);
  expect(same.recall(as({ endUser: 'u2' }))).toBeDefined();
});

test('remembered no longer than the memory, nor past the Retry-After', async () => {
  vi.useFakeTimers({ toFake: ['Date'] });
  const { memory, call } = memoryOver(taken, 1_000);
  memory.remember(call(), REFUSED, 0);
  vi.setSystemTime(Date.now() + 999);
  expect(memory.recall(call())).toBeDefined();
  vi.setSystemTime(Date.now() + 1);
  expect(memory.recall(call())).toBeUndefined();
  expect(memory.size).toBe(0);

  memory.remember(call(), { ...REFUSED, retryAfterSeconds: 1 }, 0);
  const long = memoryOver(taken, 60_000);
  long.memory.remember(long.call(), { ...REFUSED, retryAfterSeconds: 1 }, 0);
  vi.setSystemTime(Date.now() + 1_000);
  expect(long.memory.recall(long.call())).toBeUndefined();
  // Waiting cannot help (the call is larger than the limit): the memory's own bound.
  long.memory.remember(long.call(), { ...REFUSED, retryAfterSeconds: null }, 0);
  vi.setSystemTime(Date.now() + 59_999);
  const answer = await long.memory.recall(long.call());
  expect(answer?.retryAfterSeconds).toBeNull();
});

test('only budget, in-flight and suspension refusals that carry a summary are remembered, and none when the memory is off', () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(call(), { ...REFUSED, code: 'end_user_limit' }, 0);
  memory.remember(call(), { ...REFUSED, summary: undefined }, 0);
  memory.remember(call(), { ...REFUSED, retryAfterSeconds: 0 }, 0);
  expect(memory.size).toBe(0);
  const off = memoryOver(taken, 0);
  off.memory.remember(off.call(), REFUSED, 0);
  expect(off.memory.size).toBe(0);
});

test('a close of the refusing level or below forgets it; a sibling closing does not', () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(call(), REFUSED, 0);
  memory.closed('org', 'sibling');
  expect(memory.recall(call())).toBeDefined();
  memory.closed('org', 'team');
  expect(memory.recall(call())).toBeUndefined();
  // The org's own window refused: any close under it gives room back.
  memory.remember(call(), { ...REFUSED, level: 'org' }, memory.closes('org'));
  memory.closed('org', 'sibling');
  expect(memory.size).toBe(0);
  // A tenant the config does not know (removed): every refusal of the org goes.
  memory.remember(call(), REFUSED, memory.closes('org'));
  memory.closed('org', 'gone');
  expect(memory.size).toBe(0);
});

test('a refusal whose admit raced a close of its org is not remembered', () => {
  const { memory, call } = memoryOver(taken);
  const before = memory.closes('org');
  memory.closed('org', 'sibling');
  memory.remember(call(), REFUSED, before);
  expect(memory.size).toBe(0);
});

test('a config applied since makes the refusal stale', () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(call(), REFUSED, 0);
  const raised = compile(1_000);
  const after = call();
  after.caller = { ...after.caller, tenant: raised.tenants.get('team')! };
  expect(memory.recall(after)).toBeUndefined();
  expect(memory.size).toBe(0);
});

test('a report not taken: clients are answered, the memory is off, the same items are sent again', async () => {
  let fail = true;
  const flaky: Report = (req) =>
    Promise.resolve(
      fail
        ? Err(new RpcError({ code: 'timeout', message: 'no answer' }))
        : Ok({ recorded: req.items.length }),
    );
  const { memory, reports, call } = memoryOver(flaky);
  memory.remember(call(), REFUSED, 0);
  const answers = await Promise.all([memory.recall(call()), memory.recall(call())]);
  expect(answers.every((a) => a?.code === 'budget_exceeded')).toBe(true);
  expect(memory.size).toBe(0);
  fail = false;
  await vi.waitFor(() => expect(reports.length).toBeGreaterThanOrEqual(2), { timeout: 2_000 });
  const last = reports.at(-1)!;
  expect(last.items).toEqual([reports[0]!.items[0]]);
  // Counted later: a new item, never merged into one that may already have been counted.
  memory.remember(call(), REFUSED, 0);
  await memory.recall(call());
  expect(reports.at(-1)!.items[0]!.id).not.toBe(reports[0]!.items[0]!.id);
});

test('stop reports what is still unreported', async () => {
  const { memory, reports, call } = memoryOver(taken);
  memory.remember(call(), REFUSED, 0);
  void memory.recall(call());
  await memory.stop();
  expect(reports.flatMap((r) => r.items.map((i) => i.count))).toEqual([1]);
});

test('holds at most maxEntries, dropping expired ones first', () => {
  vi.useFakeTimers({ toFake: ['Date'] });
  const { memory, call } = memoryOver(taken, 1_000, compile(100), { maxEntries: 2 });
  const shape = (model: string) => call({ model, promptTokens: 1, maxTokens: 1 });
  memory.remember(shape('a'), REFUSED, 0);
  memory.remember(shape('b'), REFUSED, 0);
  memory.remember(shape('c'), REFUSED, 0);
  expect(memory.size).toBe(2);
  vi.setSystemTime(Date.now() + 1_000);
  memory.remember(shape('c'), REFUSED, 0);
  expect(memory.size).toBe(1);
});

test('a cap on calls in flight: any repeat is refused, whatever its size, until a call of the org closes', async () => {
  const { memory, call } = memoryOver(taken);
  const atCap: Refused = {
    ...REFUSED,
    code: 'concurrency_limit',
    retryAfterSeconds: 1,
    budget: null,
    level: null,
    summary: { kind: 'team|concurrency_limit|x', fields: '["type","admission.refused"]' },
  };
  memory.remember(call(), atCap, 0);
  const answer = await memory.recall(call({ promptTokens: 1, maxTokens: 1 }));
  expect(answer).toMatchObject({ code: 'concurrency_limit', message: atCap.message });
  // Any close in the org may have freed the slot (the cap may be an ancestor's).
  memory.closed('org', 'sibling');
  expect(memory.recall(call())).toBeUndefined();
});

test('one org holds at most maxPerOrg of them, so its end users cannot take the whole memory', () => {
  vi.useFakeTimers({ toFake: ['Date'] });
  const { memory, call: of } = memoryOver(taken, 1_000, compile(100), { maxPerOrg: 2 });
  const call = (endUser: string) => of({ endUser, promptTokens: 1, maxTokens: 1 });
  for (const user of ['u1', 'u2', 'u3']) memory.remember(call(user), USER_REFUSED, 0);
  expect(memory.size).toBe(2);
  expect(memory.recall(call('u3'))).toBeUndefined();
  // Once the org's have expired, new ones are remembered again.
  vi.setSystemTime(Date.now() + 1_000);
  memory.remember(call('u3'), USER_REFUSED, 0);
  expect(memory.size).toBe(1);
  expect(memory.recall(call('u3'))).toBeDefined();
});

test('a suspension: any repeat is refused until the org hears its tenant.resumed', async () => {
  const { memory, call } = memoryOver(taken);
  const suspended = levelless('tenant_suspended');
  memory.remember(call(), suspended, 0);
  memory.remember(call({ model: 'other' }), REFUSED, 0);
  expect(await memory.recall(call({ maxTokens: 1 }))).toMatchObject({ code: 'tenant_suspended' });
  // The parent's resume (the suspension may have been the org's): the suspension goes, the
  // budget refusal stays.
  memory.resumed('org');
  expect(memory.recall(call())).toBeUndefined();
  expect(memory.recall(call({ model: 'other' }))).toBeDefined();
  // A refusal whose admit raced the resume is not remembered.
  const before = memory.closes('org');
  memory.resumed('team');
  memory.remember(call(), suspended, before);
  expect(memory.recall(call())).toBeUndefined();
});

test('while a close under the refusing level runs, its refusals are neither answered here nor remembered', async () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(call(), REFUSED, 0);
  // A sibling's close cannot give team's window room: the refusal is still answered.
  memory.closing('org', 'sibling');
  expect(memory.recall(call())).toBeDefined();
  // team's own close: the authority may apply it at any moment.
  memory.closing('org', 'team');
  expect(memory.recall(call())).toBeUndefined();
  memory.remember(call({ model: 'other' }), REFUSED, memory.closes('org'));
  expect(memory.recall(call({ model: 'other' }))).toBeUndefined();
  memory.closed('org', 'team');
  memory.closed('org', 'sibling');
  // Both ended: refusals made from now on are remembered again.
  memory.remember(call(), REFUSED, memory.closes('org'));
  expect(await memory.recall(call())).toMatchObject({ code: 'budget_exceeded' });
});

test("before the prompt is counted (promptTokens 0) a refusal of any size answers, and a budget's only when it was of a prompt taken as 0", async () => {
  const { memory, call } = memoryOver(taken);
  memory.remember(call(), REFUSED, 0);
  expect(memory.recall(call({ promptTokens: 0 }))).toBeUndefined();
  expect(await memory.recall(call())).toMatchObject({ code: 'budget_exceeded' });
  // Refused with its prompt taken as 0 (an uncounted admit): no prompt needs less.
  memory.remember(call({ model: 'other', promptTokens: 0 }), REFUSED, 0);
  expect(await memory.recall(call({ model: 'other', promptTokens: 0 }))).toMatchObject({
    code: 'budget_exceeded',
  });
  expect(await memory.recall(call({ model: 'other', promptTokens: 5_000 }))).toMatchObject({
    code: 'budget_exceeded',
  });
  expect(memory.recall(call({ model: 'other', promptTokens: 0, maxTokens: 99 }))).toBeUndefined();
  const suspended: Refused = {
    ...REFUSED,
    code: 'tenant_suspended',
    summary: { ...REFUSED.summary!, kind: 'team|tenant_suspended|x' },
  };
  memory.remember(call({ model: 'gpt-5', api: 'messages' }), suspended, 0);
  const early = memory.recall(call({ api: 'messages', promptTokens: 0 }));
  expect(await early).toMatchObject({ code: 'tenant_suspended' });
});

/** A team at its maxEndUsers, tracking alice and bob (64 bytes of filter, the least). */
const AT_CAP: Refused = {
  ...levelless('end_user_limit'),
  windows: [window(), window('end_user')],
  trackedFilter: endUserFilterOf(['alice', 'bob']),
};

test('a team at its maxEndUsers: a call naming an end user it does not track is answered, a tracked one (or none) is asked; no close forgets it', async () => {
  const { memory, call } = memoryOver(taken, 60_000);
  memory.remember(call({ endUser: 'carol' }), AT_CAP, memory.closes('org'));
  // Any size, key or end user not tracked; the new end user's windows, empty as carol's were.
  const answer = await memory.recall(call({ endUser: 'dave', maxTokens: 1, caller: other() }));
  expect(answer?.code).toBe('end_user_limit');
  // The end users tracked stay at the edge.
  expect(answer).not.toHaveProperty('trackedFilter');
  expect(answer?.windows).toEqual([window(), { ...window('end_user'), subject: 'dave' }]);
  expect(memory.recall(call({ endUser: 'alice' }))).toBeUndefined();
  expect(memory.recall(call())).toBeUndefined();
  // What the authority checks before the cap: a stored response's owner, the config's register.
  expect(memory.recall(call({ endUser: 'dave', previousResponseId: 'resp_1' }))).toBeUndefined();
  expect(memory.recall(call({ endUser: 'dave', model: 'gpt-4' }))).toBeUndefined();
  memory.closing('org', 'team');
  expect(memory.recall(call({ endUser: 'erin' }))).toBeDefined();
  memory.closed('org', 'team');
  expect(memory.recall(call({ endUser: 'erin' }))).toBeDefined();
  // A new config (the tenant compiled again) forgets it.
  const next = memoryOver(taken, 60_000);
  next.memory.remember(next.call({ endUser: 'carol' }), AT_CAP, 0);
  const recompiled = compile(100);
  const moved = { ...next.call({ endUser: 'dave' }) };
  moved.caller = { ...moved.caller, tenant: recompiled.tenants.get('team')! };
  expect(next.memory.recall(moved)).toBeUndefined();
  expect(next.memory.size).toBe(0);

  function other() {
    return { ...call().caller, keyId: 'k2' };
  }
});

test("a key's own maxEndUsers, or a team naming none of its end users, is not remembered; nor past maxTrackedBytes", () => {
  const { memory, call } = memoryOver(taken, 60_000);
  memory.remember(call({ endUser: 'carol' }), { ...AT_CAP, trackedFilter: undefined }, 0);
  expect(memory.size).toBe(0);
  const small = memoryOver(taken, 60_000, compile(100), { maxTrackedBytes: 100 });
  small.memory.remember(small.call({ endUser: 'carol' }), AT_CAP, 0);
  expect(small.memory.size).toBe(1);
  // Replaced: its own 64 bytes no longer count.
  const grown = { ...AT_CAP, trackedFilter: endUserFilterOf(['alice', 'bob', 'dave']) };
  small.memory.remember(small.call({ endUser: 'carol' }), grown, 0);
  expect(small.memory.size).toBe(1);
  expect(small.memory.recall(small.call({ endUser: 'dave' }))).toBeUndefined();
  expect(small.memory.recall(small.call({ endUser: 'erin' }))).toBeDefined();
  small.memory.remember(
    small.call({ endUser: 'carol' }, 'sibling'),
    { ...AT_CAP, trackedFilter: endUserFilterOf(['a', 'b']) },
    0,
  );
  expect(small.memory.size).toBe(1);
});

import { modelPrices } from '@holdfast/config';
import { expect } from 'vitest';
import type OpenAI from 'openai';
import { APIError } from 'openai';
import { sha256Hex } from '../src/index.js';
import { auditDrift, clickhouseBooks, providerBooks, withAggregator } from './books.js';
import { pick, prng, type Rand } from './fuzz.js';
import { post } from './surfaces.js';
import {
  apiError,
  edgeTest as test,
  entry,
  nothingHeldAnywhere,
  type Stack,
  type TestConfig,
} from './harness.js';

/**
 * Red team, reasoning items passed back. OpenAI's reasoning models used statelessly (`store:
 * false`, `include: ["reasoning.encrypted_content"]`, as zero-data-retention agents run them) get
 * their reasoning back in the next request's input: within the current turn (after the last user
 * message, a function-calling loop) the model's whole reasoning goes back into its context and is
 * billed as input, though the item shows an empty summary and an opaque encrypted content. The
 * mock bills it so (the tokens sealed in the item). 8 agents run such loops on a reasoning model
 * priced like gpt-5, half streamed, while a hostile client collects reasoning items from its own
 * calls (each billed in full) and sends 8 at once, each with all of them stuffed after a function
 * call's output and the smallest output. Whatever the edge counts, the provider's bill never
 * exceeds the tenant's token or dollar limit, the ledger and ClickHouse have the provider's bill,
 * and nothing is held at the end.
 */

const TENANT = 'agents';
const KEY = 'sk-agents';
const LIMITS = { tokens: 150_000, usd: 0.5 } as const;
const GPT5 = { inputPerMTok: 1.25, outputPerMTok: 10, cachedInputPerMTok: 0.125 };
const MODEL = 'gpt-5';

function agents(c: TestConfig): void {
  c.models.push({
    id: MODEL,
    upstream: 'default',
    tokenizer: 'o200k_base',
    price: GPT5,
    reasoning: true,
  });
  for (const u of c.upstreams) u.timeoutMs = 30_000;
  c.tenants.push({
    id: TENANT,
    mode: 'reserve',
    maxInFlight: 64,
    budgets: [
      { window: 'month', limit: LIMITS.tokens, unit: 'tokens' },
      { window: 'day', limit: LIMITS.usd, unit: 'usd' },
    ],
    useCases: [{ id: 'uc', maxTokens: 1_500, models: [MODEL] }],
    keys: [{ id: 'agents-key', sha256: sha256Hex(KEY), defaultUseCase: 'uc' }],
  });
}

const TOOLS = [
  {
    type: 'function' as const,
    name: 'lookup_budget',
    description: 'Remaining budget of a team',
    parameters: { type: 'object', properties: { team: { type: 'string' } } },
    strict: false,
  },
];

type Item = Record<string, unknown> & { type?: string };
type Body = Record<string, unknown> & { input: Item[] };

/** What the client saw of one call: 200 with the output items, or the refusal's code. */
interface Outcome {
  status: number;
  code?: string;
  output: Item[];
  /** x-holdfast-prompt-tokens: the prompt as the edge counted it. */
  counted: number;
}

class Tally {
  readonly statuses: Record<string, number> = {};
  readonly stuffed: Outcome[] = [];
  add(o: Outcome): void {
    const key = o.code ? `${o.status} ${o.code}` : String(o.status);
    this.statuses[key] = (this.statuses[key] ?? 0) + 1;
  }
}

/** One call through the edge with the official client, streamed or not. */
async function respond(client: OpenAI, body: Body, stream: boolean): Promise<Outcome> {
  const params = {
    model: MODEL,
    tools: TOOLS,
    store: false,
    include: ['reasoning.encrypted_content' as const],
    ...body,
  } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming;
  try {
    if (!stream) {
      const { data, response } = await client.responses.create(params).withResponse();
      const counted = Number(response.headers.get('x-holdfast-prompt-tokens'));
      return { status: 200, output: data.output as unknown as Item[], counted };
    }
    const { data, response } = await client.responses
      .create({ ...params, stream: true })
      .withResponse();
    let output: Item[] = [];
    for await (const event of data) {
      if (event.type === 'response.completed' || event.type === 'response.incomplete') {
        output = event.response.output as unknown as Item[];
      }
    }
    const counted = Number(response.headers.get('x-holdfast-prompt-tokens'));
    return { status: 200, output, counted };
  } catch (err) {
    if (!(err instanceof APIError) || err.status !== 429) throw err;
    return { status: 429, code: String(err.code), output: [], counted: 0 };
  }
}

const question = (r: Rand): Item => ({
  role: 'user',
  type: 'message',
  content: `How much budget does team ${Math.floor(r() * 1_000)} have left this month?`,
});
const answer = (call: Item): Item => ({
  type: 'function_call_output',
  call_id: call.call_id,
  output: `{"remaining": ${String(call.call_id).length * 7}}`,
});
const effort = (r: Rand) => ({ effort: pick(r, ['low', 'medium', 'high'] as const) });

/**
 * The first step of a function-calling loop at medium effort: sealed (`store: false`, its
 * reasoning item with its encrypted content) or `stored` (store on, no encrypted content asked).
 */
const firstStep = (
  client: OpenAI,
  r: Rand,
  { stored = false, stream = false }: { stored?: boolean; stream?: boolean } = {},
) =>
  respond(
    client,
    {
      input: [question(r)],
      tool_choice: 'required',
      reasoning: { effort: 'medium' },
      max_output_tokens: 1_500,
      ...(stored ? { store: true, include: [] } : {}),
    },
    stream,
  );

/** The output's reasoning item (there is one: every step reasons). */
const reasoningOf = (o: Outcome) => o.output.find((x) => x.type === 'reasoning')!;

/**
 * An agent: a few stateless function-calling loops, each step passing back every item so far
 * (the reasoning items with their encrypted content) and the function's output; the last step
 * answers. A refusal ends the agent.
 */
async function agent(client: OpenAI, r: Rand, tally: Tally): Promise<void> {
  for (let loop = 0; loop < 3; loop++) {
    const input: Item[] = [question(r)];
    for (let step = 0; step < 4; step++) {
      const last = step === 3;
      const out = await respond(
        client,
        {
          input,
          tool_choice: last ? 'auto' : 'required',
          reasoning: effort(r),
          max_output_tokens: 1_500,
        },
        r() < 0.5,
      );
      tally.add(out);
      if (out.status !== 200) return;
      if (last) break;
      const call = out.output.find((o) => o.type === 'function_call');
      if (!call) throw new Error(`step ${step} made no function call: ${JSON.stringify(out)}`);
      input.push(...out.output, answer(call));
    }
  }
}

/**
 * The hostile client: 24 first steps at high effort (each billed in full), then 8 calls at once,
 * each with every reasoning item collected stuffed after a function call's output, asking for
 * the smallest output.
 */
async function hostile(client: OpenAI, r: Rand, tally: Tally): Promise<void> {
  const firsts = await Promise.all(
    Array.from({ length: 24 }, (_, i) =>
      respond(
        client,
        {
          input: [question(r)],
          tool_choice: 'required',
          reasoning: { effort: 'high' },
          max_output_tokens: 1_500,
        },
        i % 2 === 0,
      ),
    ),
  );
  for (const o of firsts) tally.add(o);
  const items = firsts.flatMap((o) => o.output.filter((x) => x.type === 'reasoning'));
  const call = firsts.flatMap((o) => o.output).find((x) => x.type === 'function_call');
  if (!call || items.length === 0) return;
  const stuffed = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      respond(
        client,
        { input: [question(r), call, answer(call), ...items], max_output_tokens: 16 },
        i % 2 === 0,
      ),
    ),
  );
  for (const o of stuffed) tally.add(o);
  tally.stuffed.push(...stuffed);
}

const micro = (usd: number) => Math.round(usd * 1e6);

test(`8 stateless agents passing back reasoning items and a client stuffing them: the provider's bill never exceeds ${LIMITS.tokens} tokens or $${LIMITS.usd}, ledger = ClickHouse = provider, nothing held`, async ({
  stack,
  redis,
  iso,
  natsUrl,
  clickhouseUrl,
  clickhouse,
}) => {
  const seed = 7;
  const s: Stack = await stack({
    patch: agents,
    behaviour: {
      reasoningTokens: 600,
      completion: { mode: 'fixed', tokens: 40 },
      tokenDelayMs: 1,
      seed,
    },
  });
  await withAggregator({ natsUrl, clickhouseUrl, clickhouse, iso }, async (ch) => {
    const client = s.openai(KEY);
    const tally = new Tally();
    await Promise.all([
      ...Array.from({ length: 8 }, (_, w) => agent(client, prng(seed * 100 + w), tally)),
      hostile(client, prng(seed), tally),
    ]);
    await s.settled(TENANT);
    await nothingHeldAnywhere(redis, iso.keyPrefix);

    const records = s.upstream.stats().recent;
    const provider = providerBooks(records, modelPrices(GPT5, 'openai'));
    const tokens = provider.prompt + provider.completion;
    const events = await s.events(
      (e) => e.filter((x) => x.type === 'reservation.settled').length === records.length,
    );
    const overruns = events.filter((e) => e.type === 'reservation.overrun');
    const stuffedBilled = records.filter((c) => c.maxTokens === 16).map((c) => c.promptTokens);
    console.log(
      `[reasoning items] statuses ${JSON.stringify(tally.statuses)}; provider billed ${tokens} tokens of ${LIMITS.tokens} (input ${provider.prompt}, output ${provider.completion}, reasoning ${provider.reasoning}), $${(provider.microUsd / 1e6).toFixed(6)} of $${LIMITS.usd}; stuffed calls admitted ${tally.stuffed.filter((o) => o.status === 200).length}/8 counted ${JSON.stringify(tally.stuffed.map((o) => o.counted))}, billed input ${JSON.stringify(stuffedBilled)}; overruns ${overruns.length}; input_tokens calls ${s.upstream.stats().requests.responsesInputTokens}`,
    );
    // The invariant, as the provider bills it: neither window past its limit.
    expect(tokens).toBeLessThanOrEqual(LIMITS.tokens);
    expect(provider.microUsd).toBeLessThanOrEqual(micro(LIMITS.usd));
    expect(overruns).toEqual([]);
    // The budget was reached, and only the budget refused.
    expect(Object.keys(tally.statuses).sort()).toEqual(['200', '429 budget_exceeded']);
    const served = tally.statuses['200']!;
    expect(provider.calls).toBe(served);
    expect(records.every((c) => c.outcome === 'completed' && c.route === 'responses')).toBe(true);
    // Each call the edge admitted was counted at what the provider billed as its input.
    const settled = events.flatMap((e) => (e.type === 'reservation.settled' ? [e] : []));
    const created = new Map(
      events.flatMap((e) =>
        e.type === 'reservation.created' ? [[e.reservationId, e.promptTokens] as const] : [],
      ),
    );
    for (const c of records) {
      expect(created.get(c.clientRequestId!), `the hold of ${c.id}`).toBeGreaterThanOrEqual(
        c.promptTokens,
      );
    }
    // The ledger, ClickHouse and the drift audit have the provider's bill.
    const ledger = await s.settled(TENANT);
    expect({ tokens: ledger.billedTokens, microUsd: ledger.billedMicroUsd }).toEqual({
      tokens,
      microUsd: provider.microUsd,
    });
    expect(settled.reduce((n, e) => n + e.costMicroUsd, 0)).toBe(provider.microUsd);
    const books = await clickhouseBooks(ch, iso.database, TENANT, 'responses', served);
    const { charged, chargedMicroUsd, apis: _apis, ...rows } = books;
    expect(rows).toEqual(provider);
    expect({ charged, chargedMicroUsd }).toEqual({
      charged: tokens,
      chargedMicroUsd: provider.microUsd,
    });
    expect(await auditDrift(s, ch, iso.database)).toEqual({ tokens: 0, usd: 0 });
  });
}, 300_000);

/** agents, and a copy of the model with an allowance for input only the upstream can count. */
function withAllowance(c: TestConfig): void {
  agents(c);
  c.models.push({
    ...entry(c.models, MODEL),
    id: 'gpt-5-allow',
    upstreamStateAllowanceTokens: 2_000,
  });
  const [uc] = entry(c.tenants, TENANT).useCases as { models: string[] }[];
  uc!.models.push('gpt-5-allow');
}

test('reasoning items the upstream cannot count (no input_tokens) are a 400 naming them, nothing held or sent; with the allowance, held one per item and billed within it; a forged one is the upstream 400', async ({
  stack,
}) => {
  const s = await stack({ patch: withAllowance, behaviour: { reasoningTokens: 600 } });
  const client = s.openai(KEY);
  const r = prng(3);
  const sealed = await firstStep(client, r, { stream: true });
  const stored = await firstStep(client, r, { stored: true });
  const call = sealed.output.find((x) => x.type === 'function_call')!;
  expect(reasoningOf(sealed).encrypted_content).toEqual(expect.any(String));
  expect(reasoningOf(stored)).not.toHaveProperty('encrypted_content');
  const turn = (...items: Item[]) => [question(r), call, answer(call), ...items];

  // A forged (altered) encrypted content was got by no call (firstOwned: every team's as far as
  // Holdfast knows): the upstream's input_tokens refuses what it did not seal, so does the edge.
  const content = reasoningOf(sealed).encrypted_content as string;
  const forged = { ...reasoningOf(sealed), encrypted_content: `${content.slice(0, -6)}AAAAA=` };
  const refused = await apiError(
    client.responses.create({ model: MODEL, input: turn(forged), store: false } as never),
  );
  expect(refused.status).toBe(400);
  expect(refused.message).toContain('could not be verified');

  // A stored reasoning item named by an id alone (an item_reference without its optional type):
  // held at what the provider bills for it, the reasoning it keeps.
  const bare = await respond(
    client,
    { input: turn({ id: reasoningOf(stored).id }), max_output_tokens: 16 },
    false,
  );
  expect(bare.counted).toBe(s.upstream.stats().recent.at(-1)!.promptTokens);
  expect(bare.counted).toBeGreaterThan(600);

  s.upstream.configure({ responsesInputTokens: false });
  const served = s.upstream.stats().recent.length;
  for (const item of [reasoningOf(sealed), reasoningOf(stored), { id: reasoningOf(stored).id }]) {
    const err = await apiError(
      client.responses.create({ model: MODEL, input: turn(item), store: false } as never),
    );
    expect(err.status).toBe(400);
    expect(err.code).toBe('invalid_request');
    expect(err.param).toBe('input.3');
    expect(err.message).toContain(item.type === 'reasoning' ? 'reasoning' : 'item_reference');
    expect(err.message).toContain('/v1/responses/input_tokens');
    expect(err.message).toContain('upstreamStateAllowanceTokens');
  }
  expect(s.upstream.stats().recent).toHaveLength(served);

  // With the allowance: the local count plus 2,000 for each of the two, and billed within it.
  const allowed = await respond(
    client,
    {
      model: 'gpt-5-allow',
      input: turn(reasoningOf(sealed), reasoningOf(stored)),
      max_output_tokens: 16,
    },
    false,
  );
  expect(allowed.status).toBe(200);
  expect(allowed.counted).toBeGreaterThan(4_000);
  const billed = s.upstream.stats().recent.at(-1)!;
  expect(billed.promptTokens).toBe(allowed.counted - 4_000 + 1_200);
  const u = await s.settled(TENANT);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length === served + 1,
  );
  expect(events.filter((e) => e.type === 'reservation.overrun')).toEqual([]);
  expect(u.windows.every((w) => w.held === 0)).toBe(true);
});

test("a reasoning model's function call sent back by id without its reasoning item (store on) is the upstream's 400: the client gets it, the hold is released, nothing billed", async ({
  stack,
}) => {
  // OpenAI reads the id of a whole item against what it stored: the call followed a reasoning
  // item, which must come with it. The team owns the call (its own output), so the edge admits
  // it, and the upstream refuses it.
  const s = await stack({ patch: agents, behaviour: { reasoningTokens: 600 } });
  const client = s.openai(KEY);
  const r = prng(5);
  const first = await firstStep(client, r, { stored: true });
  const call = first.output.find((x) => x.type === 'function_call')!;
  const rs = reasoningOf(first);
  const before = await s.settled(TENANT);
  const billedBefore = s.upstream.stats().billed;
  const input = [question(r), call, answer(call)];
  for (const stream of [false, true]) {
    const err = await apiError(
      client.responses.create({
        model: MODEL,
        tools: TOOLS,
        input,
        max_output_tokens: 100,
        ...(stream ? { stream: true } : {}),
      } as never),
    );
    expect(err.status, `stream ${stream}`).toBe(400);
    expect(err.code).toBe('invalid_request');
    expect(err.message).toContain(
      `Item '${String(call.id)}' of type 'function_call' was provided without its required 'reasoning' item: '${String(rs.id)}'.`,
    );
  }
  const after = await s.settled(TENANT);
  expect(after.windows.map((w) => w.used)).toEqual(before.windows.map((w) => w.used));
  expect(after.windows.every((w) => w.held === 0)).toBe(true);
  expect(s.upstream.stats().billed).toEqual(billedBefore);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.released').length === 2,
  );
  const released = events.filter((e) => e.type === 'reservation.released');
  expect(released.map((e) => [e.reason, e.chargedTokens])).toEqual([
    ['upstream_error', 0],
    ['upstream_error', 0],
  ]);
  expect(events.filter((e) => e.type === 'reservation.settled')).toHaveLength(1);
  // With its reasoning item (by id) along, the same call is served.
  const served = await respond(
    client,
    {
      input: [question(r), { type: 'reasoning', id: rs.id, summary: [] }, call, answer(call)],
      store: true,
      include: [],
      max_output_tokens: 100,
    },
    false,
  );
  expect(served.status).toBe(200);
});

/**
 * agents under an org `lab` with a neighbour team, and a stranger team of its own org: each
 * may call the reasoning model.
 */
function rivals(c: TestConfig): void {
  agents(c);
  const own = entry(c.tenants, TENANT);
  c.tenants.push({ id: 'lab', budgets: [{ window: 'day', limit: 10_000_000, unit: 'tokens' }] });
  own.parent = 'lab';
  for (const [id, parent] of [
    ['neighbour', 'lab'],
    ['stranger', undefined],
  ] as const) {
    c.tenants.push({
      id,
      ...(parent ? { parent } : {}),
      mode: 'reserve',
      budgets: [{ window: 'month', limit: LIMITS.tokens, unit: 'tokens' }],
      useCases: [{ id: 'uc', maxTokens: 1_500, models: [MODEL] }],
      keys: [{ id: `${id}-key`, sha256: sha256Hex(`sk-${id}`), defaultUseCase: 'uc' }],
    });
  }
}

test("another team's sealed reasoning (encrypted_content) sent with store: false is a 400 naming input, JSON or streamed, and its count too: nothing counted, held or sent; the team that got it sends it back; content no call is recorded with is every team's", async ({
  stack,
  redis,
  iso,
}) => {
  // The upstream opens sealed reasoning for any caller of its account (every team's): the model
  // would read the owner's hidden reasoning into the other team's call.
  const s = await stack({ patch: rivals, behaviour: { reasoningTokens: 600 } });
  const owner = s.openai(KEY);
  const r = prng(11);
  // One step answered as JSON, one streamed: the item's content is recorded from either.
  const steps = [await firstStep(owner, r), await firstStep(owner, r, { stream: true })];
  await s.settled(TENANT);
  const turn = (o: Outcome) => {
    const call = o.output.find((x) => x.type === 'function_call')!;
    return [question(r), reasoningOf(o), call, answer(call)];
  };
  const body = (o: Outcome, stream: boolean) => ({
    model: MODEL,
    tools: TOOLS,
    input: turn(o),
    store: false,
    include: ['reasoning.encrypted_content'],
    max_output_tokens: 100,
    ...(stream ? { stream: true } : {}),
  });
  for (const o of steps) expect(reasoningOf(o).encrypted_content).toEqual(expect.any(String));

  const { requests } = s.upstream.stats();
  const before = { responses: requests.responses, counts: requests.responsesInputTokens };
  for (const rival of ['neighbour', 'stranger']) {
    // Its windows (and its org's: the neighbour shares lab's with the owner) as they were.
    const windows = (await s.settled(rival)).windows;
    for (const [i, o] of steps.entries()) {
      for (const stream of [false, true]) {
        const err = await apiError(
          s.openai(`sk-${rival}`).responses.create(body(o, stream) as never),
        );
        const what = `${rival}, step ${i}, stream ${stream}`;
        expect(err.status, what).toBe(400);
        expect(err.code, what).toBe('invalid_request');
        expect(err.param, what).toBe('input');
        expect(err.message, what).toContain('encrypted_content');
      }
      const counted = await post(s, '/v1/responses/input_tokens', body(o, false), {
        authorization: `Bearer sk-${rival}`,
      });
      expect(counted.status).toBe(400);
      expect(counted.body.error).toMatchObject({ code: 'invalid_request', param: 'input' });
    }
    expect((await s.settled(rival)).windows, rival).toEqual(windows);
    expect(windows.every((w) => w.held === 0)).toBe(true);
  }
  const after = s.upstream.stats().requests;
  expect({ responses: after.responses, counts: after.responsesInputTokens }).toEqual(before);

  // The team whose calls got them sends them back, either way.
  for (const [i, o] of steps.entries()) {
    for (const stream of [false, true]) {
      const served = await respond(owner, body(o, false), stream);
      expect(served.status, `step ${i}, stream ${stream}`).toBe(200);
    }
  }

  // Content no call is recorded with (relayed before the upgrade, or got on another edge by a
  // call whose settle is not recorded yet: the team's next step may come first) is every
  // team's: refusing it would refuse the team its own loop. The records gone, the neighbour's
  // replay is served (and billed to the neighbour).
  const records = await redis.keys(`${iso.keyPrefix}:*:fo:ec_*`);
  expect(records.length).toBeGreaterThanOrEqual(steps.length);
  await redis.del(...records);
  const served = await respond(s.openai('sk-neighbour'), body(steps[0]!, false), false);
  expect(served.status).toBe(200);
});

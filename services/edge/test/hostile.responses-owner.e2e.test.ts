import { waitFor, type Redis } from '@holdfast/testkit';
import { expect } from 'vitest';
import { edgeTest as test, entry, KEYS, type Stack, type TestConfig } from './harness.js';
import { post, words } from './surfaces.js';

/**
 * The owner recorded at `key`: the authority writes it just after the call's close script
 * (close.ts withOwner), so a test that saw the tenant settled waits for it a moment.
 */
const ownerAt = (redis: Redis, key: string) =>
  waitFor(async () => (await redis.get(key)) ?? undefined, { what: `an owner at ${key}` });

/**
 * Red team, state kept upstream shared between tenants (found by an audit of the Responses
 * surface). Every tenant goes through the same upstream account (the edge holds the provider's
 * key), so a response one tenant stored is readable by any: a tenant that learned another's
 * `resp_...` id sent it as `previous_response_id`, and the provider read the other tenant's
 * conversation into its context (billed to the reader). A response is now owned by the tenant
 * whose call stored it (recorded at the authority with the call's settle), and a call naming a
 * response its tenant does not own gets what OpenAI answers for an unknown id, before anything
 * is counted, held or sent. The same for the output items of a stored response, which an input
 * item reads by id (`item_reference`, a reasoning item without its content): they are owned
 * with their response, and another tenant's is answered as an unknown item.
 */

const A = { authorization: `Bearer ${KEYS.support}` };
const B = { authorization: `Bearer ${KEYS.batch}` };

/** What reached the mock upstream: Responses calls and input_tokens counts. */
function sent(s: Stack) {
  const { requests } = s.upstream.stats();
  return { responses: requests.responses, counts: requests.responsesInputTokens };
}

/** A count of a create's body (`/v1/responses/input_tokens`). */
const count = (s: Stack, body: object, headers: Record<string, string>) =>
  post(s, '/v1/responses/input_tokens', body, headers);

const call = (extra: Record<string, unknown>) => ({
  model: 'gpt-4o-mini',
  input: words(12),
  max_output_tokens: 40,
  ...extra,
});

/** The id of the first output message of a Responses answer. */
const messageId = (body: Record<string, unknown>) =>
  (body.output as { id: string; type: string }[]).find((o) => o.type === 'message')!.id;

/** support-bot's stored response (a code word to read back), settled: its owner recorded. */
async function storedBySupport(s: Stack) {
  const first = await post(s, '/v1/responses', call({ input: `The code word is ${words(30)}` }), A);
  expect(first.status).toBe(200);
  await s.settled('support-bot');
  return first.body;
}

/** The 400 of an id the caller's team does not own, as the edge words it. */
const notFound = (message: string, param = 'input') => ({
  message,
  type: 'invalid_request_error',
  code: 'invalid_request',
  param,
});

/**
 * batch-summariser's call streamed through the official client is refused with the same 400
 * before any event, and nothing of its refused calls reached the upstream or its windows.
 */
async function refusedUnspent(s: Stack, body: object, before: ReturnType<typeof sent>) {
  const streamed = await s
    .openai(KEYS.batch)
    .responses.create({ ...body, stream: true } as never)
    .catch((e: unknown) => e);
  expect(streamed).toMatchObject({ status: 400, param: 'input' });
  expect(sent(s)).toEqual(before);
  const usageB = await s.settled('batch-summariser');
  expect(usageB.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);
}

/** The response-owner keys under the test's prefix. */
const ownerKeys = (redis: { keys(p: string): Promise<string[]> }, prefix: string) =>
  redis.keys(`${prefix}:{*}:ro:*`);

test("a tenant naming another tenant's response is answered as for an unknown id: nothing counted, held or sent; the owner continues it", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack();
  const id = (await storedBySupport(s)).id as string;
  expect(id).toMatch(/^resp_/);
  // Recorded in support-bot's org slot (its hash tag), kept 30 days.
  const owner = `${iso.keyPrefix}:{support-bot}:ro:${id}`;
  expect(await ownerKeys(redis, iso.keyPrefix)).toContain(owner);
  expect(await ownerAt(redis, owner)).toBe('support-bot');
  expect(await redis.pttl(owner)).toBeGreaterThan(29 * 86_400_000);

  const before = sent(s);
  const stolen = await post(s, '/v1/responses', call({ previous_response_id: id }), B);
  expect(stolen.status).toBe(400);
  expect(stolen.body.error).toEqual({
    message: `Previous response with id '${id}' not found.`,
    type: 'invalid_request_error',
    code: 'previous_response_not_found',
    param: 'previous_response_id',
  });
  // Its count is answered the same, body for body, and nothing is counted upstream.
  const stolenCount = await count(s, call({ previous_response_id: id }), B);
  expect(stolenCount.status).toBe(400);
  expect(JSON.stringify(stolenCount.body)).toBe(JSON.stringify(stolen.body));
  // The same answer as for an id nobody stored: nothing tells the two apart.
  const unknown = 'resp_0123456789abcdef0123456789abcdef';
  const none = await post(s, '/v1/responses', call({ previous_response_id: unknown }), B);
  expect(none.status).toBe(400);
  expect(none.body.error).toEqual({
    ...(stolen.body.error as object),
    message: `Previous response with id '${unknown}' not found.`,
  });
  // Streaming, through the official client: the same error, raised before any event.
  const streamed = await s
    .openai(KEYS.batch)
    .responses.create({ ...call({ previous_response_id: id }), stream: true })
    .catch((e: unknown) => e);
  expect(streamed).toMatchObject({ status: 400, code: 'previous_response_not_found' });
  expect(sent(s)).toEqual(before);
  const usageB = await s.settled('batch-summariser');
  expect(usageB.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);

  // Not a refusal that sticks: batch-summariser's own calls go on, and so do its own responses.
  const own = await post(s, '/v1/responses', call({}), B);
  expect(own.status).toBe(200);
  await s.settled('batch-summariser');
  const ownNext = await post(
    s,
    '/v1/responses',
    call({ previous_response_id: own.body.id, input: 'And then?' }),
    B,
  );
  expect(ownNext.status).toBe(200);

  // The owner continues its own, streaming: the stored conversation is read (and counted).
  const stream = await s.openai(KEYS.support).responses.create({
    ...call({ previous_response_id: id, input: 'What was the code word?' }),
    stream: true,
  });
  let ended: { id: string; previous_response_id?: string | null } | undefined;
  for await (const event of stream) {
    if (event.type === 'response.completed' || event.type === 'response.incomplete') {
      ended = event.response;
      // On at once, as an agent does: its stream's end and its settle may still be on their
      // way, and the continuation waits for the settle (the owner) on this edge.
      break;
    }
  }
  expect(ended?.previous_response_id).toBe(id);
  // The owner counts its continuation: the count its call is then held with.
  const continued = call({ previous_response_id: ended!.id, input: 'Once more?' });
  const counted = await count(s, continued, A);
  expect(counted.status).toBe(200);
  const third = await post(s, '/v1/responses', continued, A);
  expect(third.status).toBe(200);
  expect(third.headers.get('x-holdfast-prompt-tokens')).toBe(String(counted.body.input_tokens));
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length >= 5,
  );
  const created = events.filter((e) => e.type === 'reservation.created');
  expect(created.filter((e) => e.tenant === 'batch-summariser')).toHaveLength(2);
  // The refusals are not budget refusals: no admission.refused event, nothing remembered.
  expect(events.filter((e) => e.type === 'admission.refused')).toEqual([]);
});

test("a tenant reading another tenant's stored item by id is answered as for an unknown item: nothing counted, held or sent; the owner reads it", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack();
  const item = messageId(await storedBySupport(s));
  expect(item).toMatch(/^msg_/);
  // Owned with its response, in support-bot's org slot, kept 30 days.
  const owner = `${iso.keyPrefix}:{support-bot}:ro:${item}`;
  expect(await ownerAt(redis, owner)).toBe('support-bot');
  expect(await redis.pttl(owner)).toBeGreaterThan(29 * 86_400_000);

  const before = sent(s);
  const question = { role: 'user', content: 'What was the code word?' };
  const notFound = (id: string) => ({
    message: `Item with id '${id}' not found (read by id in input).`,
    type: 'invalid_request_error',
    code: 'invalid_request',
    param: 'input',
  });
  const unknown = 'msg_0123456789abcdef0123456789abcdef';
  for (const [input, id] of [
    [[{ type: 'item_reference', id: item }, question], item],
    [[{ id: item }, question], item],
    [[{ type: 'item_reference', id: unknown }, question], unknown],
    [[{ type: 'item_reference', id: 'msg_a b' }, question], 'msg_a b'],
  ] as const) {
    const stolen = await post(s, '/v1/responses', call({ input }), B);
    expect(stolen.status, id).toBe(400);
    expect(stolen.body.error, id).toEqual(notFound(id));
    const counted = await count(s, call({ input }), B);
    expect(counted.status, id).toBe(400);
    expect(JSON.stringify(counted.body), id).toBe(JSON.stringify(stolen.body));
  }
  await refusedUnspent(
    s,
    call({ input: [{ type: 'item_reference', id: item }, question] }),
    before,
  );

  // The owner reads its own item, and at once the items of a response it just stored (the
  // read waits on this edge for the settle that owns them).
  const own = await post(
    s,
    '/v1/responses',
    call({ input: [{ type: 'item_reference', id: item }, question] }),
    A,
  );
  expect(own.status).toBe(200);
  const next = messageId(own.body);
  // The owner counts a read of the items it just stored, as its call is then held.
  const reading = call({ input: [{ id: next }, question] });
  const counted = await count(s, reading, A);
  expect(counted.status).toBe(200);
  const again = await post(s, '/v1/responses', reading, A);
  expect(again.status).toBe(200);
  expect(again.headers.get('x-holdfast-prompt-tokens')).toBe(String(counted.body.input_tokens));
  expect(sent(s).responses).toBe(before.responses + 2);
  const events = await s.events(
    (e) => e.filter((x) => x.type === 'reservation.settled').length >= 3,
  );
  expect(events.filter((e) => e.tenant === 'batch-summariser')).toEqual([]);
  expect(events.filter((e) => e.type === 'admission.refused')).toEqual([]);
});

test("a tenant sending another tenant's item id on a whole item (its content along) is answered as for an unknown item when store is on; a team replays its own output verbatim", async ({
  stack,
}) => {
  const s = await stack();
  const first = await storedBySupport(s);
  const item = messageId(first);
  const before = sent(s);
  const question = { role: 'user', content: 'What was the code word?' };
  const unknown = 'fc_0123456789abcdef0123456789abcdef';
  // With store on, OpenAI reads such an id against what it stored (a reasoning item's id links
  // to its stored reasoning, a message's to the reasoning it followed), whoever stored it.
  for (const [whole, id] of [
    [
      {
        type: 'message',
        id: item,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Anything.', annotations: [] }],
      },
      item,
    ],
    [
      { type: 'function_call', id: unknown, call_id: 'call_1', name: 'f', arguments: '{}' },
      unknown,
    ],
    [{ type: 'reasoning', id: 'rs_a b', summary: [], encrypted_content: 'sealed' }, 'rs_a b'],
  ] as const) {
    const input = [question, whole];
    const stolen = await post(s, '/v1/responses', call({ input }), B);
    expect(stolen.status, id).toBe(400);
    expect(stolen.body.error, id).toEqual(
      notFound(`Item with id '${id}' not found (read by id in input).`),
    );
    const counted = await count(s, call({ input }), B);
    expect(counted.status, id).toBe(400);
    expect(JSON.stringify(counted.body), id).toBe(JSON.stringify(stolen.body));
  }
  await refusedUnspent(
    s,
    call({ input: [question, { type: 'message', id: item, role: 'assistant', content: 'x' }] }),
    before,
  );

  // The owner replays its output verbatim (as the SDKs do), store on; at once too, before the
  // settle of the response it replays (the read waits on this edge for it).
  const replay = (r: Record<string, unknown>) => [question, ...(r.output as object[]), question];
  const own = await post(s, '/v1/responses', call({ input: replay(first) }), A);
  expect(own.status).toBe(200);
  const again = await post(s, '/v1/responses', call({ input: replay(own.body) }), A);
  expect(again.status).toBe(200);
  // store: false reads no item by id: a team replays the output of its store: false calls.
  const unstored = await post(s, '/v1/responses', call({ store: false }), B);
  expect(unstored.status).toBe(200);
  const next = call({ store: false, input: replay(unstored.body) });
  expect((await post(s, '/v1/responses', next, B)).status).toBe(200);
  expect(sent(s).responses).toBe(before.responses + 4);
});

test("the stored-response endpoints (retrieve, list input items, delete, cancel) are not served: any team's request is the edge's 404, never the upstream's; the owner continues its response", async ({
  stack,
}) => {
  // OpenAI serves a stored response, its input items and its deletion to whoever names its id
  // with the account's key: were the edge to pass them on, any team could read or delete any
  // other's. It serves none of them (docs/api.md).
  const s = await stack();
  const first = await storedBySupport(s);
  const id = first.id as string;
  const routes = [
    ['GET', `/v1/responses/${id}`],
    ['GET', `/v1/responses/${id}/input_items`],
    ['GET', `/v1/responses/${id}/input_items?limit=100&order=asc`],
    ['DELETE', `/v1/responses/${id}`],
    ['POST', `/v1/responses/${id}/cancel`],
  ] as const;
  for (const [method, url] of routes) {
    for (const headers of [A, B]) {
      const res = await s.edge.app.inject({ method, url, headers });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('not_found');
      expect(res.body).not.toContain('code word');
    }
  }
  // Nothing was deleted upstream: its owner continues it.
  const next = await post(s, '/v1/responses', call({ previous_response_id: id }), A);
  expect(next.status).toBe(200);
});

test('store: false records no owner: its id cannot be continued, and the upstream is not asked', async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack();
  const unstored = await post(s, '/v1/responses', call({ store: false }), A);
  expect(unstored.status).toBe(200);
  await s.settled('support-bot');
  expect(await ownerKeys(redis, iso.keyPrefix)).toEqual([]);
  const before = sent(s);
  const next = await post(s, '/v1/responses', call({ previous_response_id: unstored.body.id }), A);
  expect(next.status).toBe(400);
  expect(next.body.error).toMatchObject({ code: 'previous_response_not_found' });
  // Nor its items.
  const item = (unstored.body.output as { id: string }[])[0]!.id;
  const read = await post(s, '/v1/responses', call({ input: [{ id: item }] }), A);
  expect(read.status).toBe(400);
  expect(read.body.error).toMatchObject({ code: 'invalid_request', param: 'input' });
  expect(sent(s)).toEqual(before);
});

test('a previous_response_id that is not a response id is a 400 naming it; nothing reaches the upstream', async ({
  stack,
}) => {
  const s = await stack();
  const before = sent(s);
  for (const bad of ['abc', 'resp_', 'resp_a b', 'resp_../x', `resp_${'a'.repeat(201)}`, 'msg_1']) {
    const r = await post(s, '/v1/responses', call({ previous_response_id: bad }), A);
    expect(r.status, bad).toBe(400);
    expect(r.body.error, bad).toMatchObject({
      code: 'invalid_request',
      param: 'previous_response_id',
    });
  }
  expect(sent(s)).toEqual(before);
});

test('conversation (state the edge cannot own: the Conversations API is not proxied) is a 400 naming it; nothing held or sent', async ({
  stack,
}) => {
  const s = await stack();
  const before = sent(s);
  for (const conversation of ['conv_123', { id: 'conv_123' }]) {
    const r = await post(s, '/v1/responses', call({ conversation }), A);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'invalid_request', param: 'conversation' });
  }
  expect(sent(s)).toEqual(before);
  const usage = await s.settled('support-bot');
  expect(usage.windows.every((w) => w.used === 0)).toBe(true);
});

test('a failOpen tenant is not served a previous response or a stored item unmetered while no authority can say whose it is', async ({
  stack,
}) => {
  const s = await stack();
  const F = { authorization: `Bearer ${KEYS.finance}` };
  const first = await post(s, '/v1/responses', call({}), F);
  expect(first.status).toBe(200);
  await s.settled('finance-ops');
  await s.stopAuthority();
  const before = sent(s);
  const next = await post(s, '/v1/responses', call({ previous_response_id: first.body.id }), F);
  expect(next.status).toBe(503);
  expect(next.body.error).toMatchObject({ code: 'budget_authority_unavailable' });
  // Nor a stored item by id.
  const item = (first.body.output as { id: string }[])[0]!.id;
  const read = await post(s, '/v1/responses', call({ input: [{ id: item }] }), F);
  expect(read.status).toBe(503);
  expect(read.body.error).toMatchObject({ code: 'budget_authority_unavailable' });
  // Nor counted: only the authority can say whose they are.
  for (const body of [
    call({ previous_response_id: first.body.id }),
    call({ input: [{ id: item }] }),
  ]) {
    const counted = await count(s, body, F);
    expect(counted.status).toBe(503);
    expect(counted.body.error).toMatchObject({
      code: 'budget_authority_unavailable',
      message: 'The budget authority is unavailable, so nothing was counted. Retry shortly.',
    });
  }
  expect(sent(s)).toEqual(before);
  // A call without state upstream is still served unmetered, as failOpen says.
  const plain = await post(s, '/v1/responses', call({}), F);
  expect(plain.status).toBe(200);
});

/** The mock runs code once a call; gpt-4o-mini prices it, and holds what it reads. */
const CODE_INTERPRETER = {
  behaviour: { toolUses: 1 },
  patch: (c: TestConfig) => {
    const model = entry(c.models, 'gpt-4o-mini') as Record<string, unknown>;
    (model.price as Record<string, unknown>).toolUses = {
      code_interpreter: 30,
      image_generation: 40,
      web_search: 10,
      file_search: 2.5,
    };
    // What the tool reads is held at the allowance (call/unseen.ts).
    model.upstreamStateAllowanceTokens = 2_000;
  },
};

/** support-bot's code writes a file, which the message cites (container_file_citation); settled. */
async function fileWrittenBySupport(s: Stack): Promise<string> {
  const code = { tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] };
  const first = await post(s, '/v1/responses', call({ ...code, max_tool_calls: 1 }), A);
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  const message = (first.body.output as { type: string; content?: unknown[] }[]).find(
    (o) => o.type === 'message',
  )!;
  const [cited] = (message.content![0] as { annotations: { file_id: string }[] }).annotations;
  expect(cited?.file_id).toMatch(/^cfile_/);
  await s.settled('support-bot');
  return cited!.file_id;
}

test("a tenant reusing another tenant's code_interpreter container is answered as for an unknown container: nothing counted, held or sent; the owner reuses it", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack(CODE_INTERPRETER);
  const code = (container: unknown) => ({
    tools: [{ type: 'code_interpreter', container }],
    max_tool_calls: 1,
  });
  // support-bot runs code in a new container (store: false: the provider keeps the container).
  const first = await post(
    s,
    '/v1/responses',
    call({ ...code({ type: 'auto' }), store: false }),
    A,
  );
  expect(first.status).toBe(200);
  const ran = (first.body.output as { type: string; container_id?: string }[]).find(
    (o) => o.type === 'code_interpreter_call',
  );
  const container = ran!.container_id!;
  expect(container).toMatch(/^cntr_/);
  await s.settled('support-bot');
  expect(await ownerAt(redis, `${iso.keyPrefix}:{support-bot}:ro:${container}`)).toBe(
    'support-bot',
  );

  const before = sent(s);
  for (const named of [container, 'cntr_0123456789abcdef', 'cntr_a b']) {
    const stolen = await post(s, '/v1/responses', call(code(named)), B);
    expect(stolen.status).toBe(400);
    expect(stolen.body.error).toEqual({
      message: `Container with id '${named}' not found (named in tools).`,
      type: 'invalid_request_error',
      code: 'invalid_request',
      param: 'tools',
    });
  }
  expect(sent(s)).toEqual(before);
  const usageB = await s.settled('batch-summariser');
  expect(usageB.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);

  // Its owner reuses it.
  const again = await post(s, '/v1/responses', call(code(container)), A);
  expect(again.status).toBe(200);
});

test("a tenant naming a file another tenant's code interpreter wrote, anywhere in its input, is answered as for an unknown file: nothing counted, held or sent; an operator's upload is anyone's", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack(CODE_INTERPRETER);
  const file = await fileWrittenBySupport(s);
  // Owned across orgs, as a Messages code execution file is.
  expect(await ownerAt(redis, `${iso.keyPrefix}:{_files}:fo:${file}`)).toBe('support-bot');

  const fileInputs = (id: string) => [
    [{ role: 'user', content: [{ type: 'input_file', file_id: id }] }],
    [{ role: 'user', content: [{ type: 'input_image', file_id: id, detail: 'low' }] }],
    [
      { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{}' },
      {
        type: 'function_call_output',
        call_id: 'c1',
        output: [{ type: 'input_file', file_id: id }],
      },
    ],
    [
      { type: 'custom_tool_call', call_id: 'c2', name: 'read', input: 'x' },
      {
        type: 'custom_tool_call_output',
        call_id: 'c2',
        output: [
          { type: 'input_text', text: 'see' },
          { type: 'input_image', file_id: id },
        ],
      },
    ],
  ];
  const before = sent(s);
  // Outside the input too: a stored prompt's variables, an image_generation tool's mask.
  const fileFields = (id: string) => [
    {
      prompt: {
        id: 'pmpt_0123456789abcdef',
        variables: { doc: { type: 'input_file', file_id: id } },
      },
      max_tool_calls: 1,
    },
    { tools: [{ type: 'image_generation', input_image_mask: { file_id: id } }], max_tool_calls: 1 },
  ];
  for (const named of [file, ` ${file}`, file.toUpperCase(), `${file}\u200b`]) {
    const bodies = [
      ...fileInputs(named).map((input) => call({ input })),
      ...fileFields(named).map((fields) => call(fields)),
    ];
    for (const body of bodies) {
      const stolen = await post(s, '/v1/responses', body, B);
      expect([stolen.status, stolen.body.error], JSON.stringify(body)).toEqual([
        400,
        notFound(`File with id '${named}' not found.`),
      ]);
      const counted = await count(s, body, B);
      expect(JSON.stringify(counted.body)).toBe(JSON.stringify(stolen.body));
    }
  }
  await refusedUnspent(s, call({ input: fileInputs(file)[0] }), before);

  // A file no call wrote (the operator's upload, `file-...`; a container file nobody's call
  // cited) is every team's, as files by id are: forwarded.
  for (const upload of ['file-0123456789abcdef', 'cfile_0123456789abcdef']) {
    const shared = await post(s, '/v1/responses', call({ input: fileInputs(upload)[0] }), B);
    expect(shared.status).toBe(200);
  }
  // Its owner reads its own file.
  const own = await post(s, '/v1/responses', call({ input: fileInputs(file)[2] }), A);
  expect(own.status).toBe(200);
});

test("a response whose client hung up mid-stream is still its team's: recorded with the release, never open to another team", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack({ behaviour: { tokenDelayMs: 50 } });
  const stream = await s
    .openai(KEYS.support)
    .responses.create({ ...call({ max_output_tokens: 200 }), stream: true });
  let id: string | undefined;
  for await (const event of stream) {
    if (event.type === 'response.created') id = event.response.id;
    // Gone once the first text arrives: the edge ends the upstream call.
    if (event.type === 'response.output_text.delta') break;
  }
  expect(id).toMatch(/^resp_/);
  await s.settled('support-bot');
  await expect.poll(() => redis.get(`${iso.keyPrefix}:{support-bot}:ro:${id}`)).toBe('support-bot');
  const stolen = await post(s, '/v1/responses', call({ previous_response_id: id }), B);
  expect([stolen.status, stolen.body.error]).toEqual([
    400,
    {
      ...notFound(`Previous response with id '${id}' not found.`, 'previous_response_id'),
      code: 'previous_response_not_found',
    },
  ]);
});

test("a file another team's code interpreter wrote is refused on Chat Completions too (a `file` part by file_id): nothing counted, held or sent", async ({
  stack,
}) => {
  const s = await stack(CODE_INTERPRETER);
  const file = await fileWrittenBySupport(s);
  const chat = (id: string) => ({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: id } }] }],
    max_tokens: 40,
  });
  const chats = () => s.upstream.stats().requests.chatCompletions;
  const before = chats();
  for (const named of [file, file.toUpperCase(), ` ${file}`]) {
    const stolen = await post(s, '/v1/chat/completions', chat(named), B);
    expect([stolen.status, stolen.body.error]).toEqual([
      400,
      notFound(`File with id '${named}' not found.`, 'messages'),
    ]);
  }
  expect(chats()).toBe(before);
  // The operator's upload is every team's; the owner reads its own.
  expect((await post(s, '/v1/chat/completions', chat('file-0123456789abcdef'), B)).status).toBe(
    200,
  );
  expect((await post(s, '/v1/chat/completions', chat(file), A)).status).toBe(200);
});

/** An MCP tool that asks the client to approve each call (the mock asks once a response). */
const MCP = {
  tools: [
    {
      type: 'mcp',
      server_label: 'docs',
      server_url: 'https://mcp.example.test',
      require_approval: 'always',
    },
  ],
  max_tool_calls: 1,
};

/** The mcp_approval_request item of a Responses answer. */
const approvalRequest = (body: Record<string, unknown>) =>
  (body.output as { id: string; type: string }[]).find((o) => o.type === 'mcp_approval_request')!;

const approve = (id: string) => ({
  type: 'mcp_approval_response',
  approval_request_id: id,
  approve: true,
});

test("a tenant approving another tenant's MCP approval request is answered as for an unknown item: nothing counted, held or sent; the owner approves its own (JSON, stream, store: false)", async ({
  stack,
  redis,
  iso,
}) => {
  const s = await stack(CODE_INTERPRETER);
  // support-bot's calls ask to approve an MCP call: answered as JSON, streamed, and unstored.
  const json = await post(s, '/v1/responses', call(MCP), A);
  expect(json.status, JSON.stringify(json.body)).toBe(200);
  const asked = approvalRequest(json.body).id;
  expect(asked).toMatch(/^mcpr_/);
  let streamed: string | undefined;
  const stream = await s
    .openai(KEYS.support)
    .responses.create({ ...call(MCP), stream: true } as never);
  type Event = { type: string; item?: { type: string; id: string } };
  for await (const event of stream as unknown as AsyncIterable<Event>) {
    if (event.type === 'response.output_item.done' && event.item?.type === 'mcp_approval_request')
      streamed = event.item.id;
  }
  expect(streamed).toMatch(/^mcpr_/);
  const unstored = await post(s, '/v1/responses', call({ ...MCP, store: false }), A);
  expect(unstored.status).toBe(200);
  const unstoredAsked = approvalRequest(unstored.body);
  await s.settled('support-bot');
  for (const id of [asked, streamed!, unstoredAsked.id]) {
    expect(await ownerAt(redis, `${iso.keyPrefix}:{support-bot}:ro:${id}`), id).toBe('support-bot');
  }

  const before = sent(s);
  const unknown = 'mcpr_0123456789abcdef0123456789abcdef';
  for (const id of [asked, streamed!, unstoredAsked.id, unknown, `${asked} `, 'mcpr_a b']) {
    for (const extra of [
      { previous_response_id: undefined },
      // The request sent back with it (as a store: false conversation is): still not its.
      { input: [{ ...unstoredAsked, id }, approve(id)] },
    ]) {
      const body = call({ ...MCP, input: [approve(id)], ...extra });
      const stolen = await post(s, '/v1/responses', body, B);
      expect([stolen.status, stolen.body.error], id).toEqual([
        400,
        notFound(`Item with id '${id}' not found (read by id in input).`),
      ]);
      const counted = await count(s, body, B);
      expect(JSON.stringify(counted.body), id).toBe(JSON.stringify(stolen.body));
    }
  }
  await refusedUnspent(s, call({ ...MCP, input: [approve(asked)] }), before);

  // The owner approves its own: stored (after its response), and unstored (the request sent back).
  const approved = await post(
    s,
    '/v1/responses',
    call({ ...MCP, previous_response_id: json.body.id, input: [approve(asked)] }),
    A,
  );
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
  const again = await post(
    s,
    '/v1/responses',
    call({ ...MCP, store: false, input: [unstoredAsked, approve(unstoredAsked.id)] }),
    A,
  );
  expect(again.status, JSON.stringify(again.body)).toBe(200);
});

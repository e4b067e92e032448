import { expect } from 'vitest';
import { apiError, edgeTest as test, KEYS } from './harness.js';
import { post, words } from './surfaces.js';

const PATH = '/v1/responses/input_tokens';

test('responses.inputTokens.count: the count a create of the same body is held with; it holds and bills nothing', async ({
  stack,
}) => {
  const s = await stack();
  const openai = s.openai(KEYS.support);
  const params = {
    model: 'gpt-4o-mini',
    instructions: 'Answer briefly.',
    input: [{ role: 'user' as const, content: words(30) }],
  };
  const counted = await openai.responses.inputTokens.count(params);
  expect(counted).toEqual({ object: 'response.input_tokens', input_tokens: expect.any(Number) });
  expect(counted.input_tokens).toBeGreaterThan(30);
  expect((await s.usage('support-bot')).billedTokens).toBe(0);
  const { response } = await openai.responses
    .create({ ...params, max_output_tokens: 100 })
    .withResponse();
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(counted.input_tokens));
  // Counted by the edge itself: the upstream's counting was not asked.
  expect(s.upstream.stats().requests.responsesInputTokens).toBe(0);
  expect((await s.settled('support-bot')).billedTokens).toBe(counted.input_tokens + 50);
});

test('input only the upstream can count (a file) is counted by its input_tokens, as the call is', async ({
  stack,
}) => {
  const s = await stack();
  const openai = s.openai(KEYS.support);
  const input = [
    {
      role: 'user' as const,
      content: [
        { type: 'input_text' as const, text: words(10) },
        {
          type: 'input_file' as const,
          filename: 'a.txt',
          file_data: 'data:text/plain;base64,aGk=',
        },
      ],
    },
  ];
  const counted = await openai.responses.inputTokens.count({ model: 'gpt-4o-mini', input });
  expect(s.upstream.stats().requests.responsesInputTokens).toBe(1);
  const { response } = await openai.responses
    .create({ model: 'gpt-4o-mini', input, max_output_tokens: 100 })
    .withResponse();
  expect(response.headers.get('x-holdfast-prompt-tokens')).toBe(String(counted.input_tokens));
  await s.settled('support-bot');
});

test('bad input gets the errors /v1/responses gives it; nothing reaches the upstream', async ({
  stack,
}) => {
  const s = await stack({ edge: { options: { bodyLimitBytes: 4_096 } } });
  const auth = { authorization: `Bearer ${KEYS.support}` };
  const cases: [string, unknown, Record<string, string>][] = [
    ['wrong type', { model: 'gpt-4o-mini', input: 5 }, auth],
    ['no model', { input: 'hi' }, auth],
    ['unknown model', { model: 'gpt-9-nope', input: 'hi' }, auth],
    ['conversation', { model: 'gpt-4o-mini', input: 'hi', conversation: 'conv_1' }, auth],
    ['no key', { model: 'gpt-4o-mini', input: 'hi' }, {}],
  ];
  for (const [what, body, headers] of cases) {
    const call = await post(s, '/v1/responses', body, headers);
    const count = await post(s, PATH, body, headers);
    expect({ what, status: count.status, body: count.body }).toEqual({
      what,
      status: call.status,
      body: call.body,
    });
    expect(call.status).toBeGreaterThanOrEqual(400);
  }
  for (const path of ['/v1/responses', PATH]) {
    const malformed = await fetch(`${s.edge.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: '{"model": "gpt-4o-mini", "input": ',
    });
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get('x-holdfast-error-code')).toBe('invalid_request');
  }
  const big = await fetch(`${s.edge.url}${PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    body: JSON.stringify({ model: 'gpt-4o-mini', input: 'x'.repeat(8_192) }),
  });
  expect(big.status).toBe(413);
  const requests = s.upstream.stats().requests;
  expect(requests.responses + requests.responsesInputTokens).toBe(0);
});

test("a previous response or stored item named by id that is not the team's is answered as its create is: nothing counted", async ({
  stack,
}) => {
  const s = await stack();
  const err = await apiError(
    s.openai(KEYS.support).responses.inputTokens.count({
      model: 'gpt-4o-mini',
      input: 'and then?',
      previous_response_id: 'resp_0123456789abcdef0123456789abcdef',
    }),
  );
  expect(err.status).toBe(400);
  expect(err).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
  const ref = await post(
    s,
    PATH,
    { model: 'gpt-4o-mini', input: [{ type: 'item_reference', id: 'msg_0123456789abcdef' }] },
    { authorization: `Bearer ${KEYS.support}` },
  );
  expect(ref.status).toBe(400);
  expect(ref.body).toMatchObject({
    error: {
      code: 'invalid_request',
      param: 'input',
      message: "Item with id 'msg_0123456789abcdef' not found (read by id in input).",
    },
  });
  expect(s.upstream.stats().requests.responsesInputTokens).toBe(0);
});

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
    // A tool result's blocks that are not blocks (was a 500: read as blocks to be counted).
    ...[[null], ['text'], [{ type: 5 }], [{ type: 'text', text: 7 }]].map((content) => ({
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content }] }],
    })),
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

test('a body nested deeper than 128 levels, in any field of any surface, is a 400; nothing held or sent; 128 levels go on', async ({
  stack,
}) => {
  const s = await stack({ patch: withClaude });
  const nest = (depth: number) => '{"a":'.repeat(depth - 1) + '{}' + '}'.repeat(depth - 1);
  const DEEP = nest(100_000);
  const ARR = '['.repeat(100_000) + ']'.repeat(100_000);
  const chat = '"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5';
  const responses = '"model":"gpt-4o-mini","input":"hi","max_output_tokens":16';
  const messages = `"model":"${CLAUDE}","max_tokens":16,"messages":[{"role":"user","content":"hi"}]`;
  const tool = (schema: string) =>
    `"tools":[{"type":"function","function":{"name":"f","parameters":${schema}}}]`;
  const toolUse = (input: string) =>
    `"model":"${CLAUDE}","max_tokens":16,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":${input}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]`;
  // Before the bound, each was a 500 (a stack overflow past validation), or, in a field the
  // edge forwards as it is, a request sent to the model that it could not read.
  const deep: Array<[string, string]> = [
    ['/v1/chat/completions', `{${chat},${tool(DEEP)}}`],
    ['/v1/chat/completions', `{${chat},${tool(`{"x":${ARR}}`)}}`],
    [
      '/v1/chat/completions',
      `{${chat},"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${DEEP}}}}`,
    ],
    ['/v1/chat/completions', `{${chat},"unknown_field":${DEEP}}`],
    ['/v1/embeddings', `{"model":"text-embedding-3-small","input":${ARR}}`],
    [
      '/v1/responses',
      `{${responses},"tools":[{"type":"function","name":"f","parameters":${DEEP}}]}`,
    ],
    [
      '/v1/responses',
      `{${responses},"text":{"format":{"type":"json_schema","name":"s","schema":${DEEP}}}}`,
    ],
    ['/v1/messages', `{${messages},"tools":[{"name":"f","input_schema":${DEEP}}]}`],
    ['/v1/messages', `{${messages},"metadata":${DEEP}}`],
    ['/v1/messages', `{${toolUse(DEEP)}}`],
    ['/v1/messages/count_tokens', `{${toolUse(DEEP)}}`],
  ];
  const send = async (path: string, body: string) => {
    const r = await fetch(`${s.edge.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEYS.support}`,
        'x-api-key': KEYS.support,
        'content-type': 'application/json',
      },
      body,
    });
    return { status: r.status, code: r.headers.get('x-holdfast-error-code'), text: await r.text() };
  };
  for (const [path, body] of deep) {
    const r = await send(path, body);
    expect(r, `${path} ${body.slice(0, 120)}`).toMatchObject({
      status: 400,
      code: 'invalid_request',
    });
    expect(r.text).toContain('more than 128 levels deep');
  }
  expect(s.upstream.stats().recent).toHaveLength(0);
  const u = await s.settled('support-bot');
  expect(u.windows.every((w) => w.used === 0 && w.held === 0)).toBe(true);
  expect((await s.events()).filter((e) => e.type === 'reservation.created')).toHaveLength(0);
  // At the bound (the body, tools, the tool, its function: 4 levels, then the schema's 124) the
  // call goes through, counted, held and settled.
  const atBound = await send('/v1/chat/completions', `{${chat},${tool(nest(124))}}`);
  expect(atBound.status, atBound.text).toBe(200);
  expect((await send('/v1/chat/completions', `{${chat},${tool(nest(125))}}`)).status).toBe(400);
});

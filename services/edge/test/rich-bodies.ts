/**
 * A rich, valid request of every surface, and the paths into it, for the tests that set each
 * field to odd values (hostile.fields, and the fast body check's differential unit test).
 */

/** The Claude model of the surface tests: on an `anthropic` upstream (the mock's Messages API). */
export const CLAUDE = 'claude-sonnet-5-5';

export type Path = Array<string | number>;

/** Every path into `v`, its own included (but not the root). */
export function paths(v: unknown, at: Path = []): Path[] {
  const out: Path[] = at.length > 0 ? [at] : [];
  if (Array.isArray(v)) v.forEach((c, i) => out.push(...paths(c, [...at, i])));
  else if (v !== null && typeof v === 'object') {
    for (const [k, c] of Object.entries(v)) out.push(...paths(c, [...at, k]));
  }
  return out;
}

export function setAt(v: unknown, at: Path, x: unknown): unknown {
  const copy = structuredClone(v) as Record<string | number, unknown>;
  let node = copy;
  for (const k of at.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  node[at.at(-1)!] = x;
  return copy;
}

const tool = { type: 'object', properties: { a: { type: 'string' } } };

/** A Responses body's counted part: what `/v1/responses/input_tokens` is sent. */
const responsesCounted = {
  model: 'gpt-4o-mini',
  instructions: 'be brief',
  input: [
    { role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
    { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
    { type: 'function_call_output', call_id: 'c1', output: 'ok' },
  ],
  tools: [{ type: 'function', name: 'f', parameters: tool }],
  tool_choice: 'auto',
  text: { format: { type: 'text' } },
};
/** A rich, valid request of each surface (tools, tool calls and results, images, schemas). */
export const BODIES: Array<[string, unknown]> = [
  [
    '/v1/chat/completions',
    {
      model: 'gpt-4o-mini',
      max_tokens: 20,
      n: 1,
      temperature: 0.5,
      stop: ['x'],
      stream_options: { include_usage: true },
      user: 'u1',
      messages: [
        { role: 'system', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
      tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: tool } }],
      tool_choice: 'auto',
      response_format: { type: 'json_object' },
      logit_bias: { '50256': -100 },
    },
  ],
  [
    '/v1/responses',
    { ...responsesCounted, max_output_tokens: 32, user: 'u1', metadata: { a: 'b' } },
  ],
  ['/v1/responses/input_tokens', responsesCounted],
  [
    '/v1/messages',
    {
      model: CLAUDE,
      max_tokens: 32,
      system: [{ type: 'text', text: 'be brief' }],
      metadata: { user_id: 'u1' },
      stop_sequences: ['x'],
      tools: [{ name: 'f', description: 'd', input_schema: tool }],
      tool_choice: { type: 'auto' },
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'hi' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          ],
        },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 't1', name: 'f', input: { a: 'x' } }],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] },
      ],
    },
  ],
  [
    '/v1/messages/count_tokens',
    {
      model: CLAUDE,
      system: 'x',
      tools: [{ name: 'f', input_schema: tool }],
      messages: [
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'ok' }] },
      ],
    },
  ],
  ['/v1/embeddings', { model: 'text-embedding-3-small', input: ['hi', 'there'], user: 'u1' }],
];

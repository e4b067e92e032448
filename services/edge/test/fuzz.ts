/**
 * Random malformed requests for the edge. Every case carries at least one defect that must
 * stop it before it can be admitted (bad auth, a body that is not a valid OpenAI request, an
 * id that cannot be registered, a body over the limit), plus random noise that alone would be
 * harmless (odd unicode, unknown fields, stray headers).
 */

type FuzzUrl =
  | '/v1/chat/completions'
  | '/v1/embeddings'
  | '/v1/responses'
  | '/v1/responses/input_tokens'
  | '/v1/messages'
  | '/v1/messages/count_tokens';

export interface FuzzCase {
  url: FuzzUrl;
  headers: Record<string, string>;
  payload: string | Buffer;
  /** What makes it invalid, for failure messages. */
  defects: string[];
}

/** The mock upstream's seeded PRNG (mulberry32), so a failing case can be replayed. */
export { prng } from '@holdfast/mock-upstream';

/** A seeded source of numbers in [0, 1) (`prng(seed)`). */
export type Rand = () => number;

export const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

/** Prompt texts of the property tests: scripts, emoji sequences, code, whitespace. */
export const HOSTILE_TEXTS = [
  'The quarterly budget review covers spend by team and model. ',
  '预算必须在并发时守住，每个调用都保留最坏情况。',
  '🎉🚀👩‍👩‍👧‍👦🇯🇵🏳️‍🌈 ',
  'الميزانية يجب أن تصمد عند التزامن. ',
  '𒀀𒀁𒀂𒀃𒀄𒀅𒀆 ',
  'function f(x){return x*2}\n\t\t  ',
];

/** A prompt text: one of HOSTILE_TEXTS repeated, or (15%) random code points, lone surrogates included. */
export function hostileText(r: Rand): string {
  if (r() < 0.15) {
    return Array.from({ length: 20 + Math.floor(r() * 80) }, () =>
      String.fromCharCode(Math.floor(r() * 0xffff)),
    ).join('');
  }
  return pick(r, HOSTILE_TEXTS).repeat(1 + Math.floor(r() * 8));
}

const ODD = [
  '\u0000',
  '\uFEFF',
  '\u202E',
  '\uD83D\uDE00',
  '\uD800',
  'e\u0301',
  '\u200B',
  '<|endoftext|>',
  '%00',
  '\\u0000',
  '${jndi:x}',
  '"',
  '\\',
  '\r\n',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  'ǅ',
];
const WRONG = [null, true, false, 0, -1, 1.5, '', 'x', [], {}, [null], { a: 1 }, '1', [1, 2]];

/** Values outside each numeric field's range (every one invalid for its field). */
const OUT_OF_RANGE: Record<string, unknown[]> = {
  max_tokens: [0, -5, 1.5, 1e21, 2 ** 53 + 1, 'NaN', -1e308],
  max_completion_tokens: [0, -1, 0.5, 1e300, '12'],
  n: [0, -1, 129, 1.5, 1e21],
  temperature: [-0.1, 2.1, 1e308, -1e308, 'NaN'],
  top_p: [-0.1, 1.1, 1e308],
  presence_penalty: [-2.1, 2.1, 1e308],
  top_logprobs: [-1, 21, 1.5],
};

/** Values of the wrong type or shape for each known field (every one invalid for its field). */
const WRONG_TYPE: Record<string, unknown[]> = {
  stream: [1, 'true', {}, []],
  stop: [1, {}, [1], ['a', 'b', 'c', 'd', 'e']],
  tools: ['x', {}, [1], [{ type: 'function' }], [{ type: 'function', function: {} }]],
  tool_choice: [1, 'sometimes', {}],
  logit_bias: ['x', { '1': 500 }, { '1': 'x' }],
  stream_options: ['x', 1, { include_usage: 'yes' }],
  response_format: ['json', { type: 'yaml' }, {}],
  seed: [1.5, 'x', 1e300],
  user: [1, {}, 'u'.repeat(600)],
  metadata: ['x', { a: 1 }],
};
const EMBEDDING_WRONG: Record<string, unknown[]> = {
  encoding_format: ['hex', 1],
  user: [1, {}],
  dimensions: [0, 1.5, 'x', 1e9],
};

function breakField(r: Rand, b: Record<string, unknown>, table: Record<string, unknown[]>) {
  const field = pick(r, Object.keys(table));
  return { ...b, [field]: pick(r, table[field]!) };
}

export interface FuzzTarget {
  /** A valid key (the fuzz must fail for other reasons). */
  key: string;
  /** A registered use case and model of that key's tenant. */
  useCase: string;
  model: string;
  embeddingModel: string;
  bodyLimit: number;
  /** trustHeaders mode: the tenant comes from x-team, not a key. */
  trustHeaders: boolean;
  team: string;
  /** An allowed Claude model (on an `anthropic` upstream): Messages is fuzzed too. */
  claude?: string;
}

const odd = (r: Rand, n = 1 + Math.floor(r() * 4)) =>
  Array.from({ length: n }, () => pick(r, ODD)).join('');

function validChat(r: Rand, t: FuzzTarget): Record<string, unknown> {
  return {
    model: t.model,
    messages: [{ role: 'user', content: `hello ${odd(r)} world` }],
    ...(r() < 0.3 ? { max_tokens: 1 + Math.floor(r() * 4_000) } : {}),
    ...(r() < 0.2 ? { stream: r() < 0.5 } : {}),
    ...(r() < 0.2 ? { [`x_${odd(r, 1)}`]: odd(r) } : {}),
  };
}

function validEmbeddings(r: Rand, t: FuzzTarget): Record<string, unknown> {
  return { model: t.embeddingModel, input: r() < 0.5 ? `text ${odd(r)}` : ['a', odd(r)] };
}

/** Breaks the body so it is no longer a valid request. */
const BODY_DEFECTS: Array<
  [string, (r: Rand, b: Record<string, unknown>, chat: boolean) => unknown]
> = [
  ['missing model', (_r, b) => ({ ...b, model: undefined })],
  ['empty model', (_r, b) => ({ ...b, model: '' })],
  [
    'model wrong type',
    (r, b) => ({
      ...b,
      model: pick(
        r,
        WRONG.filter((w) => typeof w !== 'string'),
      ),
    }),
  ],
  ['model odd name', (r, b) => ({ ...b, model: `gpt ${odd(r)}` })],
  ['model not allowed', (r, b) => ({ ...b, model: `unknown-model-${Math.floor(r() * 1e6)}` })],
  [
    'messages/input wrong',
    (r, b, chat) =>
      chat
        ? { ...b, messages: pick(r, WRONG) }
        : { ...b, input: pick(r, [null, 1, {}, [], [[]], [-1], [1.5], [{}]]) },
  ],
  [
    'missing messages/input',
    (_r, b, chat) => (chat ? { ...b, messages: undefined } : { ...b, input: undefined }),
  ],
  [
    'bad role',
    (r, b, chat) =>
      chat
        ? {
            ...b,
            messages: [{ role: pick(r, ['', 'wizard', 1, null, 'USER', odd(r)]), content: 'x' }],
          }
        : { ...b, encoding_format: 'hex' },
  ],
  [
    'content wrong type',
    (r, b, chat) =>
      chat
        ? {
            ...b,
            messages: [
              {
                role: 'user',
                content: pick(r, [
                  1,
                  true,
                  { text: 'x' },
                  [{ type: 'wat' }],
                  [{ type: 'text' }],
                  [{ type: 'image_url', image_url: {} }],
                ]),
              },
            ],
          }
        : { ...b, dimensions: pick(r, [0, -1, 1.5, 'x', 1e9]) },
  ],
  ['number out of range', (r, b, chat) => breakField(r, b, chat ? OUT_OF_RANGE : EMBEDDING_WRONG)],
  ['known field wrong type', (r, b, chat) => breakField(r, b, chat ? WRONG_TYPE : EMBEDDING_WRONG)],
  ['not an object', (r) => pick(r, [[], 1, 'str', null, true, [{}]])],
];

export function fuzzCase(r: Rand, t: FuzzTarget): FuzzCase {
  const chat = r() < 0.8;
  const url = chat ? '/v1/chat/completions' : '/v1/embeddings';
  const body = chat ? validChat(r, t) : validEmbeddings(r, t);
  return withDefects(r, t, url, body, (b) => {
    const [name, defect] = pick(r, BODY_DEFECTS);
    return [name, defect(r, b, chat)];
  });
}

/** A body defect of one surface: its name and the broken body. */
type SurfaceDefect = (b: Record<string, unknown>) => [string, unknown];

/**
 * `body` (valid) given one defect at least: of the request (auth, use case, JSON, size, content
 * type) or of the body (`bodyDefect`), and sometimes a second body defect on top.
 */
function withDefects(
  r: Rand,
  t: FuzzTarget,
  url: FuzzUrl,
  valid: Record<string, unknown>,
  bodyDefect: SurfaceDefect,
  anthropic = false,
): FuzzCase {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  // The Anthropic SDK sends its key as x-api-key; curl users send a bearer token.
  const keyHeader = anthropic && r() < 0.7 ? 'x-api-key' : 'authorization';
  const keyValue = (key: string) => (keyHeader === 'x-api-key' ? key : `Bearer ${key}`);
  if (t.trustHeaders) headers['x-team'] = t.team;
  else headers[keyHeader] = keyValue(t.key);
  headers['x-use-case'] = t.useCase;
  // Noise that alone is harmless.
  if (!t.trustHeaders && r() < 0.3) headers['x-team'] = odd(r).replace(/[\r\n\0]/g, '');
  let body: unknown = valid;
  let payload: string | Buffer | undefined;
  const defects: string[] = [];

  const kind = r();
  if (kind < 0.2) {
    defects.push('auth');
    if (t.trustHeaders) {
      headers['x-team'] = pick(r, [
        '',
        'nobody',
        'Team',
        `${t.team}\r\nx-evil: 1`,
        `${t.team} `,
        odd(r),
        'a'.repeat(200),
      ]);
    } else {
      const how = pick(r, ['missing', 'unknown', 'scheme', 'inject', 'unicode', 'long']);
      if (how === 'missing') delete headers[keyHeader];
      else if (how === 'unknown') headers[keyHeader] = keyValue(`sk-${Math.floor(r() * 1e9)}`);
      else if (how === 'scheme') headers.authorization = `Basic ${t.key}`;
      else if (how === 'inject') headers[keyHeader] = `${keyValue(t.key)}\r\nx-evil: 1`;
      else if (how === 'unicode') headers[keyHeader] = `${keyValue(t.key)}${odd(r)}`;
      else headers[keyHeader] = keyValue('k'.repeat(10_000));
      if (how === 'scheme' && keyHeader === 'x-api-key') delete headers['x-api-key'];
    }
  } else if (kind < 0.3) {
    defects.push('use case');
    headers['x-use-case'] = pick(r, [
      '',
      'UC 1',
      `${t.useCase}\r\nx-evil: 1`,
      `${t.useCase},${t.useCase}`,
      odd(r),
      'U'.repeat(100),
      `UC-${Math.floor(r() * 1e6)}`,
    ]);
  } else if (kind < 0.45) {
    defects.push('json');
    const text = JSON.stringify(body);
    payload = pick(r, [
      text.slice(0, Math.floor(r() * text.length)),
      `${text}}`,
      text.replace(':', ''),
      `{"model": "${t.model}", "messages": [}`,
      '{"__proto__": {"polluted": true}, "model": "x"}',
      `{"constructor": {"prototype": {"x": 1}}}`,
      '',
      'null',
      `${text}x${odd(r)}`,
      "{'model': 'x'}",
      text.replace(/"/g, ''),
      'NaN',
      '[',
      '\u0000'.repeat(10),
    ]);
    if (payload === text) payload = `${text}]`;
  } else if (kind < 0.5) {
    defects.push('too large');
    payload = JSON.stringify({ ...(body as object), filler: 'x'.repeat(t.bodyLimit + 1) });
  } else if (kind < 0.53) {
    defects.push('content type');
    headers['content-type'] = pick(r, [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data',
    ]);
  } else {
    const [name, broken] = bodyDefect(body as Record<string, unknown>);
    defects.push(name);
    body = broken;
  }
  // Sometimes a second defect on top.
  if (r() < 0.2 && typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const [name, broken] = bodyDefect(body as Record<string, unknown>);
    defects.push(name);
    body = broken;
  }
  return { url, headers, payload: payload ?? JSON.stringify(body) ?? 'undefined', defects };
}

/** The model defects every surface shares (an allowed model of the surface in `model`). */
function modelDefects(r: Rand, b: Record<string, unknown>): [string, unknown] {
  return pick(r, [
    ['missing model', { ...b, model: undefined }],
    ['empty model', { ...b, model: '' }],
    [
      'model wrong type',
      {
        ...b,
        model: pick(
          r,
          WRONG.filter((w) => typeof w !== 'string'),
        ),
      },
    ],
    ['model odd name', { ...b, model: `gpt ${odd(r)}` }],
    ['model too long', { ...b, model: 'm'.repeat(257) }],
    ['model not allowed', { ...b, model: `unknown-model-${Math.floor(r() * 1e6)}` }],
  ] as [string, unknown][]);
}

const RESPONSES_OUT_OF_RANGE: Record<string, unknown[]> = {
  max_output_tokens: [0, -1, 15, 1.5, 1e21, '64', 2 ** 53 + 1],
  max_tool_calls: [0, -1, 1.5, '3'],
  temperature: [-0.1, 2.1, 1e308, -1e308, 'NaN'],
  top_p: [-0.1, 1.1, 1e308],
  top_logprobs: [-1, 21, 1.5],
};

const RESPONSES_WRONG_TYPE: Record<string, unknown[]> = {
  stream: [1, 'true', {}, []],
  instructions: [5, {}, ['x']],
  tools: ['x', {}, [1], [{}], [{ type: '' }], [{ type: 'function', parameters: 'x' }]],
  tool_choice: [1, {}, { type: '' }, [], true],
  text: ['x', 1, { format: 'json' }, { format: { type: '' } }],
  reasoning: ['high', 1, { effort: 7 }, { summary: [] }],
  user: [1, {}, 'u'.repeat(513)],
  safety_identifier: [7, 's'.repeat(513)],
  metadata: ['x', { a: 1 }, [1]],
  background: ['yes', 1],
  store: ['yes', 0],
  previous_response_id: ['', 5, 'p'.repeat(257)],
  conversation: ['', 5, {}, { id: '' }],
  prompt: ['x', {}, { id: '' }],
  stream_options: ['x', 1, []],
  parallel_tool_calls: [1, 'no'],
  truncation: ['sometimes', 1, true],
  include: ['x', [1], {}],
};

/** A valid Responses body of the target's model: a string or a list of items as input. */
function validResponses(r: Rand, t: FuzzTarget): Record<string, unknown> {
  const text = `hello ${odd(r)} world`;
  return {
    model: t.model,
    input: r() < 0.5 ? text : [{ role: 'user', content: [{ type: 'input_text', text }] }],
    ...(r() < 0.3 ? { max_output_tokens: 16 + Math.floor(r() * 4_000) } : {}),
    ...(r() < 0.2 ? { stream: r() < 0.5 } : {}),
    ...(r() < 0.2 ? { [`x_${odd(r, 1)}`]: odd(r) } : {}),
  };
}

function responsesDefect(r: Rand): SurfaceDefect {
  const defects: SurfaceDefect[] = [
    (b) => modelDefects(r, b),
    (b) => [
      'input wrong',
      {
        ...b,
        input: pick(r, [
          1,
          true,
          {},
          [1],
          ['x'],
          [null],
          [{ role: '' }],
          [{ type: '' }],
          [{ role: 'user', content: 5 }],
          [{ role: 'user', content: [{ type: '' }] }],
          [{ role: 'user', content: [{ text: 'no type' }] }],
          [{ role: 'user', content: [{ type: 'input_image', detail: 'ultra' }] }],
          [{ type: 'function_call', call_id: 1 }],
          [{ type: 'reasoning', summary: 'x' }],
        ]),
      },
    ],
    (b) => ['number out of range', breakField(r, b, RESPONSES_OUT_OF_RANGE)],
    (b) => ['known field wrong type', breakField(r, b, RESPONSES_WRONG_TYPE)],
    () => ['not an object', pick(r, [[], 1, 'str', null, true, [{}]])],
  ];
  return (b) => pick(r, defects)(b);
}

const MESSAGES_WRONG_TYPE: Record<string, unknown[]> = {
  system: [5, {}, [{ type: 'text', text: 5 }], [{ text: 'no type' }], [1]],
  tools: ['x', {}, [1], [{}], [{ name: '' }], [{ name: 'f', input_schema: 'x' }]],
  tool_choice: ['auto', 1, {}, { type: 'sometimes' }, { type: 'tool', name: '' }],
  thinking: ['on', 1, {}, { type: '' }, { type: 'enabled', budget_tokens: 0 }],
  metadata: ['x', 1, { user_id: 'u'.repeat(257) }, { user_id: 5 }],
  stop_sequences: ['x', [1], {}],
  stream: [1, 'yes', {}],
  temperature: [-0.1, 1.1, 'x', 1e308],
  top_p: [-0.1, 1.1, 'x'],
  top_k: [-1, 1.5, 'x'],
  service_tier: [1, {}, []],
  container: ['', 1, 'c'.repeat(257), { id: '' }, { skills: 'x' }, { skills: [{ type: 'x' }] }],
};

/** A valid Messages body of the target's Claude model (count_tokens: without max_tokens). */
function validMessages(r: Rand, t: FuzzTarget, count: boolean): Record<string, unknown> {
  const text = `hello ${odd(r)} world`;
  return {
    model: t.claude,
    messages: [{ role: 'user', content: r() < 0.5 ? text : [{ type: 'text', text }] }],
    ...(count ? {} : { max_tokens: 1 + Math.floor(r() * 4_000) }),
    ...(r() < 0.2 ? { system: 'be brief' } : {}),
    ...(r() < 0.2 && !count ? { stream: r() < 0.5 } : {}),
  };
}

function messagesDefect(r: Rand, count: boolean): SurfaceDefect {
  const defects: SurfaceDefect[] = [
    (b) => modelDefects(r, b),
    (b) => [
      'messages wrong',
      {
        ...b,
        messages: pick(r, [
          ...WRONG,
          [{ role: 'system', content: 'x' }],
          [{ role: 'user' }],
          [{ role: 'user', content: 5 }],
          [{ role: 'user', content: [] }],
          [{ role: 'user', content: [{ type: '' }] }],
          [{ role: 'user', content: [{ text: 'no type' }] }],
          [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'x' } }] }],
          [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [null] }] }],
        ]),
      },
    ],
    (b) => ['missing messages', { ...b, messages: undefined }],
    (b) => ['known field wrong type', breakField(r, b, MESSAGES_WRONG_TYPE)],
    () => ['not an object', pick(r, [[], 1, 'str', null, true, [{}]])],
  ];
  if (!count) {
    defects.push(
      (b) => ['missing max_tokens', { ...b, max_tokens: undefined }],
      (b) => [
        'max_tokens out of range',
        { ...b, max_tokens: pick(r, [0, -5, 2.5, '100', 1e21, null, 2 ** 53 + 1]) },
      ],
    );
  }
  return (b) => pick(r, defects)(b);
}

/**
 * A malformed request to any surface: chat and embeddings as `fuzzCase`, and (with a Claude
 * model in the target) the Responses API and its input_tokens, Messages and Messages'
 * count_tokens, each with its own fields broken, besides the request's auth, use case, JSON,
 * size and content type.
 */
export function fuzzAnySurface(r: Rand, t: FuzzTarget): FuzzCase {
  const which = r();
  if (which < 0.2 || !t.claude) return fuzzCase(r, t);
  if (which < 0.5) {
    const url = which < 0.4 ? '/v1/responses' : '/v1/responses/input_tokens';
    return withDefects(r, t, url, validResponses(r, t), responsesDefect(r));
  }
  const count = which >= 0.85;
  return withDefects(
    r,
    t,
    count ? '/v1/messages/count_tokens' : '/v1/messages',
    validMessages(r, t, count),
    messagesDefect(r, count),
    true,
  );
}

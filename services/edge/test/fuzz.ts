/**
 * Random malformed requests for the edge. Every case carries at least one defect that must
 * stop it before it can be admitted (bad auth, a body that is not a valid OpenAI request, an
 * id that cannot be registered, a body over the limit), plus random noise that alone would be
 * harmless (odd unicode, unknown fields, stray headers).
 */

export interface FuzzCase {
  url: '/v1/chat/completions' | '/v1/embeddings';
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
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (t.trustHeaders) headers['x-team'] = t.team;
  else headers.authorization = `Bearer ${t.key}`;
  headers['x-use-case'] = t.useCase;
  // Noise that alone is harmless.
  if (!t.trustHeaders && r() < 0.3) headers['x-team'] = odd(r).replace(/[\r\n\0]/g, '');
  let body: unknown = chat ? validChat(r, t) : validEmbeddings(r, t);
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
      if (how === 'missing') delete headers.authorization;
      else if (how === 'unknown') headers.authorization = `Bearer sk-${Math.floor(r() * 1e9)}`;
      else if (how === 'scheme') headers.authorization = `Basic ${t.key}`;
      else if (how === 'inject') headers.authorization = `Bearer ${t.key}\r\nx-evil: 1`;
      else if (how === 'unicode') headers.authorization = `Bearer ${t.key}${odd(r)}`;
      else headers.authorization = `Bearer ${'k'.repeat(10_000)}`;
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
    const [name, defect] = pick(r, BODY_DEFECTS);
    defects.push(name);
    body = defect(r, body as Record<string, unknown>, chat);
  }
  // Sometimes a second defect on top.
  if (r() < 0.2) {
    const [name, defect] = pick(r, BODY_DEFECTS);
    if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
      defects.push(name);
      body = defect(r, body as Record<string, unknown>, chat);
    }
  }
  return { url, headers, payload: payload ?? JSON.stringify(body) ?? 'undefined', defects };
}

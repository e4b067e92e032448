import { ODD_VALUES } from '@holdfast/events/testing';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { BODIES, CLAUDE, paths, setAt } from '../../test/rich-bodies.js';
import { SDK_BODIES } from '../../test/sdk-bodies.js';
import { ChatRequest } from '../surfaces/chat/schema.js';
import { EmbeddingsRequest } from '../surfaces/embeddings/schema.js';
import { CountTokensRequest, MessagesRequest } from '../surfaces/messages/schema.js';
import { ResponsesRequest } from '../surfaces/responses/schema.js';
import { fastParse } from './fast-bodies.js';
import { zodValidatorCompiler } from './validate.js';
import type { EdgeError } from '../errors.js';

/**
 * The call routes' bodies are checked fast (ajv) and judged by zod only when that check does
 * not pass. This holds the fast path to zod: over the rich body of every surface, each field
 * deleted or set to each odd value, its keys reversed, and bodies as the SDKs send them, a
 * body the fast path passes is one zod passes, with the same output to the byte (key order
 * too); and the route's validator answers exactly as zod alone would (value or error).
 */

const SCHEMAS: Record<string, z.ZodType> = {
  '/v1/chat/completions': ChatRequest,
  '/v1/responses': ResponsesRequest,
  '/v1/responses/input_tokens': ResponsesRequest,
  '/v1/messages': MessagesRequest,
  '/v1/messages/count_tokens': CountTokensRequest,
  '/v1/embeddings': EmbeddingsRequest,
};

/** The shared odd values, and those the hostile tests found or the schemas' edges call for. */
const ODD: unknown[] = [
  ...ODD_VALUES,
  false,
  1,
  16,
  256,
  'x'.repeat(257),
  'x'.repeat(513),
  '\ud800',
  'x\ud800'.repeat(200),
  // Astral characters about the limits: both count code points (2 UTF-16 units each).
  '🧾'.repeat(200),
  '🧾'.repeat(257),
  2 ** 53 + 2,
  [null],
  [{}],
  [''],
  ['x', 'y'],
  [1, 2],
  [[1]],
  { type: 'text' },
  { type: 'text', text: 'x' },
  { type: 'tool_result', content: [null] },
  { type: 'tool_result', content: [{ type: 'text', text: 'x' }] },
  { type: 'ephemeral' },
  { type: 'function', function: { name: 'f' } },
  { id: 'x' },
  'auto',
  'low',
  'base64',
  'user',
  'tool_result',
  CLAUDE,
];

/** `v` with the keys of every object in reverse order (zod puts them back in its own). */
function reversed(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reversed);
  if (typeof v !== 'object' || v === null) return v;
  return Object.fromEntries(
    Object.entries(v)
      .reverse()
      .map(([k, c]) => [k, reversed(c)]),
  );
}

/** `v` with odd unknown keys in every object: an index, and names Object.prototype has. */
function withOddKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withOddKeys);
  if (typeof v !== 'object' || v === null) return v;
  const odd = { constructor: 'c', toString: 1, '0': 'i' };
  return { ...odd, ...Object.fromEntries(Object.entries(v).map(([k, c]) => [k, withOddKeys(c)])) };
}

/** Every body a schema is tried on: each field deleted, or set to each odd value. */
function* variants(base: unknown): Generator<unknown> {
  yield base;
  yield reversed(base);
  yield withOddKeys(base);
  yield reversed(withOddKeys(base));
  for (const at of paths(base)) {
    yield setAt(base, at, undefined);
    for (const v of ODD) yield setAt(base, at, v);
  }
}

/** A validator's answer as the client sees it: the value, or the error's code, message, param. */
function stated(r: unknown): unknown {
  const { value, error } = r as { value?: unknown; error?: EdgeError };
  return error ? { code: error.code, message: error.message, param: error.param } : { value };
}

type Validator = (body: unknown) => unknown;
const compiled = new Map<z.ZodType, { validate: Validator; today: Validator }>();

/** The route's validator of `schema`, and today's: zod alone (a clone is no route's schema). */
function validators(schema: z.ZodType): { validate: Validator; today: Validator } {
  let v = compiled.get(schema);
  if (!v) {
    const validate = zodValidatorCompiler({ schema } as never) as Validator;
    const today = zodValidatorCompiler({ schema: schema.clone() } as never) as Validator;
    compiled.set(schema, (v = { validate, today }));
  }
  return v;
}

const counts = { fast: 0, zodOnly: 0, refused: 0 };

/** The fast path's answer against zod's, on its own and through the route's validator. */
function judge(schema: z.ZodType, input: unknown): void {
  const what = JSON.stringify(input)?.slice(0, 300);
  const zod = schema.safeParse(structuredClone(input));
  const fast = fastParse(schema)!(structuredClone(input));
  if (fast !== undefined) {
    expect(zod.success, what).toBe(true);
    expect(JSON.stringify(fast), what).toBe(JSON.stringify(zod.data));
    expect(fast, what).toEqual(zod.data);
  }
  // The route's validator against today's (zod alone: a clone is no call route's schema).
  const { validate, today } = validators(schema);
  const validated = validate(structuredClone(input));
  const now = today(structuredClone(input));
  expect(JSON.stringify(validated), what).toBe(JSON.stringify(now));
  expect(stated(validated), what).toEqual(stated(now));
  counts[fast !== undefined ? 'fast' : zod.success ? 'zodOnly' : 'refused']++;
}

describe('the fast body check (ajv) passes only what zod passes, with its output', () => {
  it('the rich body of every surface passes fast, its top level in any order', () => {
    for (const [url, body] of BODIES) {
      const schema = SCHEMAS[url]!;
      const backwards = Object.fromEntries(Object.entries(body as object).reverse());
      for (const input of [body, backwards]) {
        expect(fastParse(schema)!(structuredClone(input)), url).toEqual(schema.parse(input));
      }
    }
    expect(new Set(BODIES.map(([url]) => url))).toEqual(new Set(Object.keys(SCHEMAS)));
  });

  it('on every field of every surface deleted or set to each odd value, keys reversed', () => {
    for (const [url, body] of BODIES) {
      for (const input of variants(body)) judge(SCHEMAS[url]!, input);
    }
    // Both kinds are many: the fast path is taken, and zod refuses.
    expect(counts.fast).toBeGreaterThan(1_000);
    expect(counts.refused).toBeGreaterThan(1_000);
  }, 120_000);

  it('on bodies as the OpenAI and Anthropic SDKs send them, every one fast', () => {
    for (const [url, body] of SDK_BODIES) {
      const schema = SCHEMAS[url]!;
      judge(schema, body);
      expect(fastParse(schema)!(structuredClone(body)), url).toBeDefined();
      for (const input of variants(body)) judge(schema, input);
    }
  }, 120_000);

  it('a refusal is the same through the fast path (errors always come from zod)', () => {
    const validate = zodValidatorCompiler({ schema: ChatRequest } as never);
    const r = validate({ model: 'm', messages: [{ role: 'user', content: 42 }] }) as {
      error: { message: string };
    };
    expect(r.error.message).toBe(
      'Invalid request: messages.0.content: expected a string or an array, got the number 42.',
    );
  });
});

type Def = {
  type: string;
  checks?: { _zod: { def: { check: string } } }[];
  shape?: Record<string, z.ZodType>;
  options?: z.ZodType[];
} & Record<string, unknown>;

/** Where `schema` has refinements, and every kind of node it has (transforms, defaults, ...). */
function survey(
  schema: z.ZodType,
  at = '$',
  out = { refined: [] as string[], kinds: new Set<string>() },
) {
  const def = (schema as unknown as { _zod: { def: Def } })._zod.def;
  out.kinds.add(def.type);
  if (def.checks?.some((c) => c._zod.def.check === 'custom')) out.refined.push(at);
  for (const key of ['innerType', 'element', 'keyType', 'valueType', 'catchall', 'in', 'out']) {
    if (def[key]) survey(def[key] as z.ZodType, `${at}.${key}`, out);
  }
  for (const [k, v] of Object.entries(def.shape ?? {})) survey(v, `${at}.${k}`, out);
  (def.options ?? []).forEach((o, i) => survey(o, `${at}|${i}`, out));
  return out;
}

describe('the body schemas are ones the fast check can judge exactly', () => {
  const blocks = ['$.messages.element.content|1.element', '$.system.innerType.innerType|1.element'];
  const refined: Record<string, string[]> = {
    '/v1/chat/completions': [],
    '/v1/responses': [],
    '/v1/responses/input_tokens': [],
    '/v1/messages': blocks,
    '/v1/messages/count_tokens': blocks,
    '/v1/embeddings': [],
  };

  it('refinements only where fast-bodies.ts has a rule for them (a new one needs a rule)', () => {
    for (const [url, schema] of Object.entries(SCHEMAS)) {
      expect(survey(schema).refined.sort(), url).toEqual(refined[url]!.sort());
    }
  });

  it('no transform, default, preprocess or pipe: zod outputs the body rebuilt', () => {
    const plain = ['object', 'optional', 'nullable', 'string', 'number', 'boolean', 'array'];
    const allowed = new Set([...plain, 'union', 'record', 'unknown', 'literal', 'enum']);
    for (const [url, schema] of Object.entries(SCHEMAS)) {
      expect(
        [...survey(schema).kinds].filter((k) => !allowed.has(k)),
        url,
      ).toEqual([]);
    }
  });
});

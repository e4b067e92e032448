import { Ajv } from 'ajv';
import type { z } from 'zod';
import { fastSchema, mapSchemas } from './fast-schema.js';
import { inputJsonSchema } from './json-schema.js';
import { inShapeOrder, SHAPE_ORDER_KEYWORD, shapeRebuilder, withShapeOrder } from './key-order.js';

/** A refinement of a schema that JSON Schema cannot say: the predicate its `.refine` calls. */
export type Rule<S extends z.ZodType> = (value: z.output<S>) => boolean;

/**
 * An exact fast verdict on a request body for a zod schema (issue 14): ajv compiled from zod's
 * own JSON Schema, with the options that make ajv judge as zod does (patterns without the `u`
 * flag, formats checked by the patterns zod emits beside them, defaults filled in place,
 * unknown keys refused as `z.strictObject` refuses them and kept as `z.looseObject` keeps
 * them). `rules` are the schema's refinements. `shapeOrder`: every object below the top is put
 * in the order zod outputs it (key-order.ts), as `requestParse` needs. true: the body, defaults
 * filled, is what zod would output (deeply equal). false: ask zod, whose verdict and error
 * stand. Each caller's differential test holds the two equal (request-check.unit.test.ts for
 * the authority's, the edge's fast-bodies.unit.test.ts).
 */
export function requestCheck<S extends z.ZodType>(
  schema: S,
  rules: readonly Rule<S>[] = [],
  options: { shapeOrder?: boolean } = {},
): RequestCheck {
  let validate: ((v: unknown) => boolean) | undefined;
  const prepare = () => (validate ??= compile(schema, options.shapeOrder === true));
  return Object.assign(
    (body: unknown) => prepare()(body) && rules.every((rule) => rule(body as z.output<S>)),
    { prepare: () => void prepare() },
  );
}

/** A request's fast check; its ajv function is compiled on the first body, or by `prepare`. */
export interface RequestCheck {
  (body: unknown): boolean;
  /**
   * Compiles it now: a server does before it serves, so that its first request does not pay
   * ~0.1 s for it (1-3 s on a loaded box, past a caller's timeout).
   */
  prepare(): void;
}

/**
 * zod's output for a body of an object schema, to the byte (key order too), or undefined: ask
 * zod. For callers that serialise the body again. The top level is put in the shape's order
 * here (SDKs send it in their own: Python's put `messages` before `model`), the rest by the
 * check.
 */
export function requestParse<S extends z.ZodObject>(
  schema: S,
  rules: readonly Rule<S>[] = [],
): FastParse<z.output<S>> {
  const check = requestCheck(schema, rules, { shapeOrder: true });
  const keys = Object.keys(schema.shape);
  const rebuild = shapeRebuilder(keys);
  const parse = (body: unknown) => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
    const ordered = inShapeOrder(body, keys) ? body : rebuild(body);
    return check(ordered) ? (ordered as z.output<S>) : undefined;
  };
  return Object.assign(parse, { prepare: () => check.prepare() });
}

/** A fast parse (zod's output, or undefined: ask zod), compiled on first use or by `prepare`. */
export interface FastParse<T> {
  (value: unknown): T | undefined;
  /** Compiles it now, as `RequestCheck.prepare`: before a server serves. */
  prepare(): void;
}

/**
 * zod's output for a value of `schema`, to the byte (key order too), or undefined: ask zod. For
 * JSON our own services send (the authority's replies, which every call's admit and settle
 * wait on): any schema, a union at the top too (the value is checked inside a wrapper, so the
 * top is put in order like the rest). zod drops a key a plain `z.object` does not name; here
 * such a key makes the value zod's to judge, so what passes needs nothing dropped.
 * `reply-check.unit.test.ts` holds it equal to zod for the call path's replies.
 */
export function replyParse<S extends z.ZodType>(schema: S): FastParse<z.output<S>> {
  let validate: ((v: unknown) => boolean) | undefined;
  const prepare = () => (validate ??= compileWrapped(schema));
  const parse = (value: unknown) => {
    const box = { v: value };
    return prepare()(box) ? (box.v as z.output<S>) : undefined;
  };
  return Object.assign(parse, { prepare: () => void prepare() });
}

let ajv: Ajv | undefined;

function compileWrapped(schema: z.ZodType): (v: unknown) => boolean {
  const { definitions, ...json } = inputJsonSchema(schema);
  const wrapper = {
    type: 'object',
    properties: { v: json },
    required: ['v'],
    ...(definitions ? { definitions } : {}),
  };
  const closed = mapSchemas(wrapper, (node) =>
    node.properties && !('additionalProperties' in node)
      ? { ...node, additionalProperties: false }
      : node,
  );
  return instance().compile(fastSchema(withShapeOrder(closed)));
}

function compile(schema: z.ZodType, shapeOrder: boolean): (v: unknown) => boolean {
  const json = inputJsonSchema(schema);
  return instance().compile(fastSchema(shapeOrder ? withShapeOrder(json) : json));
}

function instance(): Ajv {
  ajv ??= new Ajv({
    removeAdditional: false,
    useDefaults: true,
    unicodeRegExp: false,
    validateFormats: false,
    allErrors: false,
    strict: false,
    keywords: [SHAPE_ORDER_KEYWORD],
    // fast-schema.ts: tagged unions by their tag, every object its own function.
    discriminator: true,
    inlineRefs: false,
    messages: false,
  });
  return ajv;
}

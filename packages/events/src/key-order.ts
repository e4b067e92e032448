import type { KeywordDefinition } from 'ajv';
import { mapSchemas } from './fast-schema.js';

const SHAPE_ORDER = 'x-shapeOrder';

type Rebuild = (data: object) => Record<string, unknown>;

/**
 * zod builds a new object in its shape's order: the known keys present, in the order the shape
 * names them, then the unknown ones a loose object keeps, in the body's order. The edge counts
 * tools, parts and items as their JSON, so a fast check that stands for zod's output must give
 * that order too (request-check.ts `requestParse`).
 */
export function inShapeOrder(data: object, keys: readonly string[]): boolean {
  let next = 0;
  let unknownSeen = false;
  for (const key in data) {
    const at = keys.indexOf(key, next);
    if (at >= 0) {
      if (unknownSeen) return false;
      next = at + 1;
    } else if (keys.includes(key)) return false;
    else unknownSeen = true;
  }
  return true;
}

/**
 * A function rebuilding an object in its shape's order (a copy; the values are the same),
 * compiled per shape as zod compiles its objects: one store per known key at its own site is
 * 3x faster than a loop storing under varying keys (measured, bench:validate).
 */
export function shapeRebuilder(keys: readonly string[]): Rebuild {
  const stores = keys.map((key) => {
    const k = JSON.stringify(key);
    // A key Object.prototype has (`constructor`) must be the body's own to be copied.
    const own = key in Object.prototype ? ` && Object.hasOwn(from, ${k})` : '';
    return `v = from[${k}]; if (v !== undefined${own}) out[${k}] = v;`;
  });
  // JSON objects have own keys only; a `__proto__` key never gets here (fastify refuses it).
  const code = `return function (from) {
    const out = {}; let v;
    ${stores.join('\n    ')}
    for (const k in from) if (!known.has(k)) out[k] = from[k];
    return out;
  }`;
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- the schema's keys, never input
  const make = new Function('known', code) as (known: Set<string>) => Rebuild;
  return make(new Set(keys));
}

/**
 * An ajv keyword putting an object in its shape's order (its value: the shape's keys), in its
 * parent, where it is not already. zod's errors do not depend on key order, so a body the
 * check then refuses is judged by zod as it was sent. Added last to an object's keywords, it
 * runs only on an object that has passed all its others (the branch of a union it is in too).
 */
export const SHAPE_ORDER_KEYWORD: KeywordDefinition = {
  keyword: SHAPE_ORDER,
  type: 'object',
  schemaType: 'array',
  modifying: true,
  errors: false,
  compile: (keys: string[]) => {
    const rebuild = shapeRebuilder(keys);
    return (data: object, at) => {
      if (inShapeOrder(data, keys)) return true;
      if (!at?.parentData) return false;
      (at.parentData as Record<string | number, unknown>)[at.parentDataProperty] = rebuild(data);
      return true;
    };
  },
};

/** `json` (zod's JSON Schema) with every object that names properties put in their order. */
export function withShapeOrder(json: unknown): unknown {
  return mapSchemas(json, (node) =>
    node.properties ? { ...node, [SHAPE_ORDER]: Object.keys(node.properties) } : node,
  );
}

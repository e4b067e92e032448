import type { KeywordDefinition } from 'ajv';
import { mapSchemas } from './fast-schema.js';

const SHAPE_ORDER = 'x-shapeOrder';

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

/** `data` rebuilt in its shape's order (a copy; the values are the same). */
export function toShapeOrder(data: object, keys: readonly string[]): Record<string, unknown> {
  const from = data as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of keys) if (Object.hasOwn(from, key)) out[key] = from[key];
  // JSON objects have own keys only; a `__proto__` key never gets here (fastify refuses it).
  for (const key in from) if (!Object.hasOwn(out, key)) out[key] = from[key];
  return out;
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
  validate: (keys: string[], data: object, _schema, at) => {
    if (inShapeOrder(data, keys)) return true;
    if (!at?.parentData) return false;
    (at.parentData as Record<string | number, unknown>)[at.parentDataProperty] = toShapeOrder(
      data,
      keys,
    );
    return true;
  },
};

/** `json` (zod's JSON Schema) with every object that names properties put in their order. */
export function withShapeOrder(json: unknown): unknown {
  return mapSchemas(json, (node) =>
    node.properties ? { ...node, [SHAPE_ORDER]: Object.keys(node.properties) } : node,
  );
}

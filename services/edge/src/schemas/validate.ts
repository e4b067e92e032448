import type { FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';
import { EdgeError } from '../errors.js';
import { fastParse } from './fast-bodies.js';

type Issue = z.core.$ZodIssue;

const A: Record<string, string> = {
  array: 'an array',
  object: 'an object',
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
};

/** What the client sent at a place, as a message shows it: `the number 42`, `an array`. */
function shown(value: unknown): string {
  if (value === undefined) return 'nothing (the field is missing)';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') {
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)}`;
  }
  // What is left of a JSON body: a number or a boolean.
  return `the ${typeof value} ${JSON.stringify(value) ?? ''}`;
}

function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let at = data;
  for (const seg of path) {
    if (typeof at !== 'object' || at === null) return undefined;
    at = (at as Record<PropertyKey, unknown>)[seg];
  }
  return at;
}

/**
 * What one issue means for the client. zod says only "Invalid input" for a union; here a union
 * names every type it takes (`content: 42`), or, when one branch matched the type and failed
 * deeper (a bad content part), that branch's own issue at its full path.
 */
function explain(issue: Issue, data: unknown): { path: PropertyKey[]; text: string } {
  const path = [...issue.path];
  const got = shown(valueAt(data, path));
  if (issue.code === 'invalid_union') {
    const u = issue as Issue & { errors: Issue[][]; options?: unknown[]; discriminator?: string };
    const firsts = u.errors.flatMap((branch) => branch.slice(0, 1));
    if (firsts.length === 0) {
      const options = (u.options ?? []).map((o) => JSON.stringify(o)).join(', ');
      return { path, text: `expected one of ${options}, got ${got}` };
    }
    if (firsts.every((i) => i.code === 'invalid_type' && i.path.length === 0)) {
      const types = [...new Set(firsts.map((i) => (i.code === 'invalid_type' ? i.expected : '')))];
      return { path, text: `expected ${types.map((t) => A[t] ?? t).join(' or ')}, got ${got}` };
    }
    const deepest = firsts.reduce((a, b) => (b.path.length > a.path.length ? b : a));
    return explain({ ...deepest, path: [...path, ...deepest.path] }, data);
  }
  if (issue.code === 'invalid_type') {
    return { path, text: `expected ${A[issue.expected] ?? issue.expected}, got ${got}` };
  }
  return { path, text: issue.message };
}

/** The first issue as an OpenAI-style message and `param` (`messages.0.content`). */
function describeIssue(
  error: z.ZodError,
  data: unknown,
): { message: string; param: string | null } {
  const issue = error.issues[0];
  if (!issue) return { message: 'Invalid request: body: invalid', param: null };
  const { path, text } = explain(issue, data);
  const param = path.length > 0 ? path.map(String).join('.') : null;
  return { message: `Invalid request: ${param ?? 'body'}: ${text}.`, param };
}

/**
 * Route schemas are zod schemas (the one source of the request types); fastify runs them before
 * the handler, and a failure becomes a 400 invalid_request naming the field. A call route's body
 * is checked fast first (fast-bodies.ts); what that does not pass, zod judges and explains.
 */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> = ({ schema }) => {
  const fast = fastParse(schema);
  // fastify compiles a route's validator as it readies the app, before it listens: the fast
  // parse's ajv is compiled now, not on the route's first call (first-call.e2e).
  fast?.prepare();
  return (data: unknown) => {
    const value = fast?.(data);
    if (value !== undefined) return { value };
    const parsed = schema.safeParse(data);
    if (parsed.success) return { value: parsed.data };
    const { message, param } = describeIssue(parsed.error, data);
    return { error: new EdgeError({ code: 'invalid_request', message, param }) };
  };
};
